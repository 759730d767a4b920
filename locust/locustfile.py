"""wirelab's Locust scenario: a REST, a gRPC and an AMQP-arm user, one task per interaction kind."""

from __future__ import annotations

from wirelab_locust import plugin  # noqa: F401  (registers the lab's options, shapes and metrics)
from wirelab_locust.grpc_user import GrpcLabUser
from wirelab_locust.rest_user import RestLabUser

# Task names are the `kind` labels and --mix weights them (lab.py). Every call reports as
# type=<protocol>, name=<kind>/<RPC>, so REST and gRPC rows of a kind sit side by side.


class RestUser(RestLabUser):
    """REST on FastAPI: JSON orders, NDJSON stream, octet-stream and base64 blobs, WebSocket."""

    host = "http://127.0.0.1:8000"
    tasks = [  # noqa: RUF012  (Locust reads the task list from the class)
        RestLabUser.unary,
        RestLabUser.server_stream,
        RestLabUser.bidi,
        RestLabUser.upload,
        RestLabUser.upload_chunked,
        RestLabUser.upload_json,
        RestLabUser.download,
        RestLabUser.download_chunked,
        RestLabUser.download_json,
    ]


class GrpcUser(GrpcLabUser):
    """gRPC on grpcio: the same kinds over one gevent-patched channel per user."""

    tasks = [  # noqa: RUF012  (Locust reads the task list from the class)
        GrpcLabUser.unary,
        GrpcLabUser.server_stream,
        GrpcLabUser.bidi,
        GrpcLabUser.upload,
        GrpcLabUser.upload_chunked,
        GrpcLabUser.download,
        GrpcLabUser.download_chunked,
    ]


class AmqpUser(GrpcLabUser):
    """The order chain's AMQP arm (--protocols amqp): orders through its gRPC edge, whose
    downstreams are queues (docs/broker.md); its calls carry protocol="amqp"."""

    protocol = "amqp"
    tasks = [GrpcLabUser.unary]  # noqa: RUF012  (Locust reads the task list from the class)
