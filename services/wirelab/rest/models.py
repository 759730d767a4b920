"""REST request and response bodies, mirroring the proto messages field for field."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LineItem(BaseModel):
    sku: str = ""
    quantity: int = 0
    unit_price_cents: int = 0


class Order(BaseModel):
    order_id: str = ""
    customer_id: str = ""
    items: list[LineItem] = Field(default_factory=list)
    attributes: dict[str, str] = Field(default_factory=dict)
    note: str = ""


class OrderRequest(BaseModel):
    order: Order = Field(default_factory=Order)
    work_ms: int = 0
    count_words: bool = False


class OrderReply(BaseModel):
    order_id: str
    item_count: int
    total_cents: int
    word_count: int
    char_count: int
    order: Order


class BlobUpload(BaseModel):
    """POST /v1/blobs/json: the blob as standard base64 in a JSON string."""

    data: str


class Blob(BaseModel):
    """GET /v1/blobs/json: the blob as standard base64, with its size and SHA-256."""

    data: str
    size: int
    sha256: str


class BlobDigest(BaseModel):
    size: int
    sha256: str
