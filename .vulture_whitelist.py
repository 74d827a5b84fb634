"""Names that `vulture layer_mteb` reports as unused but that callers outside the package use by keyword.

Read by vulture only (see [tool.vulture] in pyproject.toml), never imported.
"""

# LayerEncoder.encode: mteb's EncoderProtocol passes the task context by keyword, so the signature must name it
task_metadata
hf_split
hf_subset
prompt_type

# the local-data load_data: mteb calls it as it calls AbsTask.load_data, with num_proc=...
num_proc

# the custom-task load_data: mteb's AbsTask.evaluate calls load_data(num_proc=..., timer=...)
timer
