"""Which of SGLang's native routes the provider serves to customer keys, and which it refuses.

Served (what `sgl.RuntimeEndpoint` needs to run a program): `GET /get_model_info` and
`/model_info` (the constructor's first call), `POST`/`PUT /generate` (every generation, fork
prefill, `select` scoring, `cache_prefix`).

Refused with 403 for customer keys: the routes that administer the server. They are the
routes SGLang 0.5.23 itself marks `AuthLevel.ADMIN_OPTIONAL` (flush the cache, profile, update
or release weights, load LoRA adapters, pause, abort any request, ...), plus `/server_info` and
`/get_server_info`, which show the launch command, paths and scheduler state of the operator's
deployment. `test_native_routes.py` re-reads SGLang's route table so a new admin route fails
the test until it is listed here. Everything else SGLang serves stays a 404 here."""

from __future__ import annotations

ADMIN_ROUTES = frozenset({
    "/set_internal_state", "/flush_cache", "/add_external_corpus", "/remove_external_corpus",
    "/list_external_corpora", "/hicache/storage-backend/clear", "/hicache/storage-backend",
    "/start_profile", "/stop_profile", "/set_trace_level", "/freeze_gc",
    "/start_expert_distribution_record", "/stop_expert_distribution_record",
    "/dump_expert_distribution_record", "/update_weights_from_disk",
    "/init_weights_send_group_for_remote_instance", "/send_weights_to_remote_instance",
    "/get_remote_instance_transfer_engine_info", "/remote_instance_transfer_engine_info",
    "/init_weights_update_group", "/destroy_weights_update_group", "/update_weights_from_tensor",
    "/begin_weight_update", "/end_weight_update", "/update_weights_from_distributed",
    "/update_weights_from_ipc", "/update_weight_version", "/get_weights_by_name",
    "/release_memory_occupation", "/resume_memory_occupation", "/weights_checker", "/slow_down",
    "/pd_role_switch", "/load_lora_adapter", "/load_lora_adapter_from_tensors",
    "/unload_lora_adapter", "/configure_logging", "/abort_request", "/pause_generation",
    "/continue_generation",
    # Not admin-marked by SGLang, but they show the operator's deployment (launch command,
    # paths, scheduler internals): refused the same way.
    "/server_info", "/get_server_info",
})  # fmt: skip
ADMIN_PREFIXES = ("/dumper/",)
MODEL_INFO_ROUTES = ("/get_model_info", "/model_info")
GENERATE_ROUTE = "/generate"
# RuntimeEndpoint.concatenate_and_append calls it; SGLang 0.5.23 has no such route (404 there).
NOT_IN_SGLANG = {
    "/concate_and_append_request": "SGLang 0.5.23 does not serve it either; join forks with "
    "the default join() (gather_variable), or set "
    "sglang.global_config.enable_parallel_encoding = False for concate_and_append",
}


def is_admin(path: str) -> bool:
    return path in ADMIN_ROUTES or path.startswith(ADMIN_PREFIXES)
