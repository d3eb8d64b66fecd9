"""Operations: what running servers report (their /metrics pages, GPU memory from DCGM or nvidia-smi, a Prometheus
server asked across a fleet) and what it says about them."""
