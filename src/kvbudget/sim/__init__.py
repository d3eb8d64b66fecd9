"""Traffic through a paged KV cache (issue #12): the block pool with prefix caching (``pool``), vLLM's V1 scheduler
(``scheduler``), the requests (``trace``: trace files; ``workload``: synthetic traffic) and the run that ties them
together (``run``). Capacity comes from an engine's plan; nothing here names an engine."""
