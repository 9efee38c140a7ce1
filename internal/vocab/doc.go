// Package vocab names what nodeaddr puts on the wire, where the API server, alerts, runbooks, the
// admission policies (deploy/) and kubectl nodeaddr match on it: the field managers and Event
// sources that say who wrote, the Event reasons and the bound on their messages, the annotations
// (the approval record, and the presets and grammar of --annotations) and the agent's log record
// that explains a change. Each name is stable and defined here once; the agent, the approver and
// the plugin all read it. A leaf: it imports nothing of nodeaddr and builds on every platform.
package vocab
