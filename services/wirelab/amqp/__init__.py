"""The AMQP arm (docs/broker.md): a topology's hops over RabbitMQ, request/reply on queues."""
