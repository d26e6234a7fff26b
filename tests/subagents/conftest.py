from otel_memory import otel

__all__ = ["otel"]
