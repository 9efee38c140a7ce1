package resolver

// The address pipeline (docs/development.md): the loop and --run-once run the same ordered stages,
// each in a stage_*.go file: selection, STUN discovery, hold-down (the loop only), provided-node-ip
// and the equal-ExternalIP rule. The last two read the Node, so a change of the Node runs them
// again on the last result of the others, without reading the kernel.

// nodeStages runs the stages that read the Node on s, the result of the kernel's stages.
func nodeStages(p Policy, node NodeInput, s State) State {
	s = withProvidedNodeIP(node.ProvidedNodeIP, s)
	return withoutExternalEqualInternal(p.KeepExternalEqualInternal, node.Unmanaged, s)
}

// Once runs the pipeline once without a loop (--run-once): no hold-down, discovery when d is not nil.
func Once(k Kernel, p Policy, d Discovery, node NodeInput) (State, error) {
	s, _, err := ResolvePolicy(k, p.Excluding(node.PodCIDRs).WithAPIServer(node.APIServer), State{Managed: p.Managed, Addresses: node.Addresses})
	if err != nil {
		return State{}, err
	}
	if d != nil {
		s = WithDiscovery(d, s)
	}
	return nodeStages(p, node, s), nil
}
