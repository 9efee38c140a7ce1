// Package inspect holds what `kubectl nodeaddr` decides, as pure functions over API objects: the
// status row of each Node (who wrote its addresses, when nodeaddr last did, its agent pod, its last
// Warning) and the stale rules (what still names an address a Node no longer has). The command in
// cmd/kubectl-nodeaddr only reads the objects and prints; everything here is table-tested without a
// cluster.
package inspect
