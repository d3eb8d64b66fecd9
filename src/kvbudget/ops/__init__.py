"""Operations: reading what a running deployment reports (Prometheus text exposition, GPU memory) and judging it
against the plan. Readers do the I/O; the judgements are pure functions of the records they return."""
