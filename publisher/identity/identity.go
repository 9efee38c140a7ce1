// Package identity names nodeaddr where the API server and its logs record who did what; a leaf
// package that builds on every platform, for kubectl nodeaddr.
package identity

// FieldManager names nodeaddr in managedFields.
const FieldManager = "nodeaddr"

// EventComponent is the source component of the Events nodeaddr records.
const EventComponent = "nodeaddr"

// ExplainMessage is the message of the agent's log record that explains each change of the
// addresses it publishes; ExplainKey is its attribute holding the explanation as a JSON array.
const (
	ExplainMessage = "addresses explained"
	ExplainKey     = "explain"
)

// RecordAnnotation is the approval record (--approval-record): the comma-separated IPs of every
// managed type the agent wrote into status.addresses, in status order.
const RecordAnnotation = "nodeaddr.io/addresses"
