"""Operations: reading a running fleet (Prometheus, a server's /metrics) to check the plan against it."""
