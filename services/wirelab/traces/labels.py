"""The span processor that gives every span the lab's labels (imported only with traces on)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from wirelab.traces import KindOf


class LabLabels(SpanProcessor):
    """Adds the lab's labels to every span as it starts (a span's own attributes, not only the
    resource's, so a query over spans finds them as it finds the metrics' labels)."""

    def __init__(self, labels: Mapping[str, str], kind_of: KindOf | None) -> None:
        self.labels = dict(labels)
        self.kind_of = kind_of

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        span.set_attributes(self.labels)
        attributes: Mapping[str, Any] = getattr(span, "attributes", None) or {}
        if "wirelab.kind" not in attributes and self.kind_of is not None:
            kind = self.kind_of(attributes)
            if kind is not None:
                span.set_attribute("wirelab.kind", kind)

    def on_end(self, span: ReadableSpan) -> None:
        return None
