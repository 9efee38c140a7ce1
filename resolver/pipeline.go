package resolver

// The address pipeline: the loop (loop_run.go) and --run-once (Once) run the same ordered stages,
// each in a stage_*.go file, each returning the state with the explanation of what it changed:
//
//  1. selection (stage_select.go): the policy's choice from one snapshot of the kernel;
//  2. STUN discovery (stage_discovery.go): the ExternalIP behind NAT;
//  3. hold-down (stage_holddown.go): an address gone keeps its place for the removal grace
//     (the loop only: a single resolution has nothing to hold);
//  4. provided-node-ip (stage_nodeip.go): the kubelet's --node-ip becomes the InternalIP;
//  5. the equal-ExternalIP rule (stage_equal.go).
//
// Stages 1-3 read the kernel and discovery; 4 and 5 read the Node (NodeInput), so a change of the
// Node runs them again on the last result of 1-3, without reading the kernel. What leaves the
// pipeline is exactly what the publisher writes for the managed types.

// nodeStages runs the stages that read the Node on s, the result of the kernel's stages.
func nodeStages(p Policy, node NodeInput, s State) State {
	s = withProvidedNodeIP(node.ProvidedNodeIP, s)
	return withoutExternalEqualInternal(p.KeepExternalEqualInternal, node.Unmanaged, s)
}

// Once runs the pipeline once without a loop (--run-once, --dry-run --run-once): selection with
// the Node's pod CIDRs excluded and its addresses kept among equal candidates, discovery when d is
// not nil, no hold-down, then the Node's stages.
func Once(k Kernel, p Policy, d Discovery, node NodeInput) (State, error) {
	s, _, err := ResolvePolicy(k, p.Excluding(node.PodCIDRs), State{Managed: p.Managed, Addresses: node.Addresses})
	if err != nil {
		return State{}, err
	}
	if d != nil {
		s = WithDiscovery(d, s)
	}
	return nodeStages(p, node, s), nil
}
