"""`sglang-mx plan`: a discrete-event simulation of SGLang 0.5.23's scheduler on a node layout,
charging roofline step costs corrected by kernel efficiency, interconnect and launch overhead."""
