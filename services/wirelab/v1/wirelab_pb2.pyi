from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LineItem(_message.Message):
    __slots__ = ("sku", "quantity", "unit_price_cents")
    SKU_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_PRICE_CENTS_FIELD_NUMBER: _ClassVar[int]
    sku: str
    quantity: int
    unit_price_cents: int
    def __init__(self, sku: _Optional[str] = ..., quantity: _Optional[int] = ..., unit_price_cents: _Optional[int] = ...) -> None: ...

class Order(_message.Message):
    __slots__ = ("order_id", "customer_id", "items", "attributes", "note")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    customer_id: str
    items: _containers.RepeatedCompositeFieldContainer[LineItem]
    attributes: _containers.ScalarMap[str, str]
    note: str
    def __init__(self, order_id: _Optional[str] = ..., customer_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[LineItem, _Mapping]]] = ..., attributes: _Optional[_Mapping[str, str]] = ..., note: _Optional[str] = ...) -> None: ...

class OrderRequest(_message.Message):
    __slots__ = ("order", "work_ms", "count_words")
    ORDER_FIELD_NUMBER: _ClassVar[int]
    WORK_MS_FIELD_NUMBER: _ClassVar[int]
    COUNT_WORDS_FIELD_NUMBER: _ClassVar[int]
    order: Order
    work_ms: int
    count_words: bool
    def __init__(self, order: _Optional[_Union[Order, _Mapping]] = ..., work_ms: _Optional[int] = ..., count_words: _Optional[bool] = ...) -> None: ...

class OrderReply(_message.Message):
    __slots__ = ("order_id", "item_count", "total_cents", "word_count", "char_count", "order")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    ITEM_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CENTS_FIELD_NUMBER: _ClassVar[int]
    WORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHAR_COUNT_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    item_count: int
    total_cents: int
    word_count: int
    char_count: int
    order: Order
    def __init__(self, order_id: _Optional[str] = ..., item_count: _Optional[int] = ..., total_cents: _Optional[int] = ..., word_count: _Optional[int] = ..., char_count: _Optional[int] = ..., order: _Optional[_Union[Order, _Mapping]] = ...) -> None: ...

class StreamRequest(_message.Message):
    __slots__ = ("count", "size", "interval_ms")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    count: int
    size: int
    interval_ms: int
    def __init__(self, count: _Optional[int] = ..., size: _Optional[int] = ..., interval_ms: _Optional[int] = ...) -> None: ...

class StreamMessage(_message.Message):
    __slots__ = ("seq", "payload")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    seq: int
    payload: bytes
    def __init__(self, seq: _Optional[int] = ..., payload: _Optional[bytes] = ...) -> None: ...

class Blob(_message.Message):
    __slots__ = ("data", "size", "sha256")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    size: int
    sha256: str
    def __init__(self, data: _Optional[bytes] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class BlobDigest(_message.Message):
    __slots__ = ("size", "sha256")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: str
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class BlobRequest(_message.Message):
    __slots__ = ("size", "chunk_size")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    chunk_size: int
    def __init__(self, size: _Optional[int] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ("seq", "payload")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    seq: int
    payload: bytes
    def __init__(self, seq: _Optional[int] = ..., payload: _Optional[bytes] = ...) -> None: ...

class Pong(_message.Message):
    __slots__ = ("seq", "payload")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    seq: int
    payload: bytes
    def __init__(self, seq: _Optional[int] = ..., payload: _Optional[bytes] = ...) -> None: ...
