"""The RocketCluster Kubernetes operator (kopf): RocketCluster resources -> NameServer and broker StatefulSets."""
