// Package identity names nodeaddr where the API server records who did what: the field manager of
// its writes (managedFields) and the source component of its Events. It is a leaf package that
// builds on every platform (publisher itself is Linux-only through resolver), so that kubectl
// nodeaddr, built for darwin too, finds nodeaddr's writes and Events by the agent's own names.
package identity

// FieldManager names nodeaddr in managedFields.
const FieldManager = "nodeaddr"

// EventComponent is the source component of the Events nodeaddr records.
const EventComponent = "nodeaddr"

// ExplainMessage is the message of the agent's log record that explains each change of the
// addresses it publishes; ExplainKey is the record's attribute holding the explanation, a JSON
// array of the lines `nodeaddr --dry-run --explain -o json` prints. kubectl nodeaddr explain reads
// the latest such record from the agent pod's log when no AddressesUpdated Event carries the
// explanation (resolver/explanation): Events expire, after the API server's --event-ttl.
const (
	ExplainMessage = "addresses explained"
	ExplainKey     = "explain"
)

// RecordAnnotation is the approval record (--approval-record): the comma-separated IPs of every
// managed type the agent wrote into status.addresses, in status order. The publisher writes it and
// the central approver (internal/csrapproval/rules) reads it.
const RecordAnnotation = "nodeaddr.io/addresses"
