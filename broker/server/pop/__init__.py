"""POP consumption: the broker hands out messages, remembers them as checkpoints in the revive topic, and
delivers what was not acked again through the pop-retry topic (docs/compatibility.md, "POP").

The wire strings (extraInfo, offset infos, retry topic names) are broker.protocol.pop's. Here `records` holds
the revive records, `revive` the service that re-delivers, `order` the orderly-pop state, `polling` the parked
pops, `mode` the consume-mode table and assignments, `service` the operations (`PopService`, what the remoting
processors and the gRPC endpoint call) and `processors` the remoting handlers.
"""
