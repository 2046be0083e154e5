"""Feed the tools teams already run: Prometheus, TensorBoard, W&B, MLflow.

Each exporter has three methods (`open(context)`, `write(points, findings)`, `close()`); the Monitor
forwards live points to them (`Monitor(..., export=["tensorboard"], prometheus_port=0)`), and
`stethoscope export …` replays a finished or imported run into them. Importing this package loads
none of the tools.
"""
