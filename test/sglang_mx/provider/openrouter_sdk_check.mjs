// OpenRouter's TypeScript SDK (@openrouter/sdk) against the provider's /api/v1, as an app would
// use it: chat (unary, streamed, a tool call round trip), the model list, the key's metadata, a
// generation lookup and a 401. The SDK validates every response with its own zod schemas; this
// prints what it read as one JSON line for test_openrouter_sdk.py to check against the ledger.
// Usage: node openrouter_sdk_check.mjs  (env: SDK_JS, BASE, KEY, MODEL)
const { OpenRouter } = await import(process.env.SDK_JS);
const errors = await import(new URL("models/errors/index.js", `file://${process.env.SDK_JS}`));
const options = { serverURL: process.env.BASE, timeoutMs: 60000, retryConfig: { strategy: "none" } };
const client = new OpenRouter({ ...options, apiKey: process.env.KEY });
const model = process.env.MODEL;
const ask = [{ role: "user", content: "Hello" }];
const tools = [{
  type: "function",
  function: { name: "get_weather", parameters: { type: "object", properties: { location: { type: "string" } } } },
}];
const out = {};

const unary = await client.chat.send({ chatRequest: { model, messages: ask, maxTokens: 4 } });
out.unary = { id: unary.id, content: unary.choices[0].message.content, cost: unary.usage.cost };

const stream = await client.chat.send({ chatRequest: { model, messages: ask, maxTokens: 3, stream: true } });
let text = "";
let last;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? "";
  last = chunk;
}
out.stream = { id: last.id, text, cost: last.usage.cost };

const toolAsk = [{ role: "user", content: "TOOLCALL weather in Paris?" }];
const first = await client.chat.send({ chatRequest: { model, messages: toolAsk, tools } });
const call = first.choices[0].message.toolCalls[0];
const history = [
  ...toolAsk,
  { role: "assistant", content: null, toolCalls: [call] },
  { role: "tool", toolCallId: call.id, content: '{"temperature": 21}' },
];
const second = await client.chat.send({ chatRequest: { model, messages: history, tools, maxTokens: 2 } });
out.tool = {
  finish: first.choices[0].finishReason,
  name: call.function.name,
  arguments: call.function.arguments,
  answer: second.choices[0].message.content,
};

const models = await client.models.list();
out.models = models.result.data.map((m) => ({ id: m.id, prompt: m.pricing.prompt }));

const key = await client.apiKeys.getCurrentKeyMetadata();
out.key = { usage: key.data.usage, label: key.data.label };

const gen = await client.generations.getGeneration({ id: unary.id });
out.generation = { id: gen.data.id, totalCost: gen.data.totalCost, tokensCompletion: gen.data.nativeTokensCompletion };

try {
  await new OpenRouter({ ...options, apiKey: "sk-mx-00000000-wrong" }).chat.send({ chatRequest: { model, messages: ask } });
  out.unauthorized = "no error";
} catch (e) {
  out.unauthorized = e instanceof errors.UnauthorizedResponseError ? "UnauthorizedResponseError" : `${e.name}: ${e.message}`;
}
console.log(JSON.stringify(out));
