"""Training: the ignite engines (``engine``), their handlers (``handlers``), learning-rate
schedules (``schedules``) and ``train(cfg, run_dir) -> TrainResult`` (``loop``)."""
