"""The gRPC transport of the LR oracle (docs/design.md §3).

- ``ldp.wire.aggregator``: ``GrpcAggregator`` (the server: a facade with public hooks over its
  parts ``connections``, ``handshake``, ``streams``, ``rounds``, ``load_relay``,
  ``ledger_reports``; docs/design.md §3) and ``GrpcLROracle`` (the ``LROracle``).
- ``ldp.wire.client``: a client process hosting one shard (``python -m ldp.wire.client``).
- ``ldp.wire.launcher``: ``launch_local(population, processes=P)``, aggregator + P clients on loopback;
  ``grpc_oracle_factory(P)``, one such cluster reused for many populations (Load).
- ``ldp.wire.ray_launcher``: ``launch_ray`` and ``ray_oracle_factory``, the same with the client
  processes placed by Ray tasks on a Ray cluster (the ``ray`` extra, imported only when used).
- ``ldp.wire.codec``: messages ↔ protobuf parts; ``ldp.wire.codegen``: ``make proto``.
- ``ldp.wire.v1``: generated code from ``proto/ldp/wire/v1/aggregator.proto`` (committed).

grpc stays inside this package and ``ldp.cli``. asyncio does not: the ``LROracle`` interface
(``ldp.local.oracle``) is async so that the same learner code runs in process and over the wire;
``ldp.core`` stays synchronous numpy. See docs/protocol.md.
"""
