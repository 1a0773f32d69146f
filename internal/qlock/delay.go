package qlock

import (
	"encoding/json"
	"path"
	"time"

	"github.com/distlock/distlock"
)

// DelayRecord is what a waiter serving a lock-delay records in its
// session (see DelayMarker), for the distlock status command: which
// acquisition is held back, after which entry went, until when. The
// record is the waiter's alone (an etcd key bound to its lease, a
// ZooKeeper ephemeral node), never a queue entry's data: a lock's waiters
// read a data change on an entry as its release.
type DelayRecord struct {
	Lock   string    `json:"lock"`
	Token  string    `json:"token"`
	Holder string    `json:"holder,omitempty"`
	Gone   string    `json:"gone"`
	Until  time.Time `json:"until"`
}

// DelayRecordName is the name of n's record under its lock's delay
// records (the drivers' DelayDir): its entry's own last path segment,
// which starts with '@' and so is no lock-name segment.
func DelayRecordName(n *Node) string { return path.Base(n.Key) }

// DelayRecordData is the data of n's delay record (DelayRecord, as JSON)
// on session st, serving a delay until until after entry gone went: for
// the drivers' MarkDelay.
func (st *State) DelayRecordData(n *Node, gone string, until time.Time) []byte {
	r := DelayRecord{
		Lock:   n.Name,
		Token:  distlock.Token{Name: n.Name, Seq: n.Token, Owner: st.owner}.String(),
		Holder: st.holder,
		Gone:   gone,
		Until:  until.UTC(),
	}
	b, _ := json.Marshal(r)
	return b
}

// ParseDelayRecord reads a delay record's data.
func ParseDelayRecord(data []byte) (DelayRecord, error) {
	var r DelayRecord
	err := json.Unmarshal(data, &r)
	return r, err
}
