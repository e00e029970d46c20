"""The controller of RocketMQ 5's controller mode: automatic master failover for broker groups.

`state` is the replicated state machine (pure), `raft` replicates it with pysyncobj's Raft, `liveness` is this
controller's view of the brokers, `processors` answers the controller request codes, and `manager` wires them
into one controller, run alone (broker.cli.mqcontroller) or inside a NameServer (enableControllerInNamesrv).
"""
