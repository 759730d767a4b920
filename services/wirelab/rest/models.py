"""REST request and response bodies, mirroring the proto messages field for field."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, StrictBool
from pydantic_core import PydanticCustomError


def _unicode(text: str) -> str:
    # JSON can spell a lone UTF-16 surrogate ("\ud800") and Python's json decodes it, but no UTF-8
    # encoder can write it back (nor can protobuf's string fields hold it): in a reply it was a
    # 500, in an attributes key silently a replacement character. So it is invalid input here.
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"holds a lone surrogate U+{ord(text[exc.start]):04X} at index {exc.start}, "
                "which is not Unicode text"
            ) from None
    return text


# A proto `string`: any Unicode text, which a lone surrogate is not.
Text = Annotated[str, AfterValidator(_unicode)]


def _json_integer(value: object) -> object:
    # JSON Schema's integer, as the document types these fields: a number without a fractional
    # part (20.0 is one), not a string nor a boolean, which pydantic's lax mode would take.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


Integer = Annotated[int, BeforeValidator(_json_integer)]


class LineItem(BaseModel):
    sku: Text = ""
    quantity: Integer = 0
    unit_price_cents: Integer = 0


class Order(BaseModel):
    order_id: Text = ""
    customer_id: Text = ""
    items: list[LineItem] = Field(default_factory=list)
    attributes: dict[Text, Text] = Field(default_factory=dict)
    note: Text = ""


class OrderRequest(BaseModel):
    order: Order = Field(default_factory=Order)
    work_ms: Integer = 0
    count_words: StrictBool = False


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


class Problem(BaseModel):
    """Every error body (400, 413, 422, 503): what was wrong, in one line."""

    detail: str
