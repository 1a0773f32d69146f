package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
)

// delayStatus is a lock-delay a waiter serves: it is the head of the
// queue, its predecessor's entry (Gone) having gone without its holder's
// release, and it holds once the delay ends (Until). As its record
// (qlock.DelayRecord) says it.
type delayStatus struct {
	Token  string    `json:"token"`
	Holder string    `json:"holder,omitempty"`
	Gone   string    `json:"gone"`
	Until  time.Time `json:"until"`
}

// readDelays reads the lock-delays the lock's waiters serve at now.
func (st *lockStatus) readDelays(ctx context.Context, b *backend.Client, now time.Time) error {
	ds, err := b.LockDelays(ctx, st.Lock, now)
	for _, r := range ds {
		st.LockDelays = append(st.LockDelays, delayStatus{Token: r.Token, Holder: r.Holder, Gone: r.Gone, Until: r.Until})
	}
	return err
}

// writeText writes a line per lock-delay served, still running at now.
func (d delayStatus) writeText(w io.Writer, now time.Time) {
	if !now.Before(d.Until) {
		return
	}
	fmt.Fprintf(w, "lock-delay: granted to %s after the previous holder's entry %s went without a release (session ended, or deleted), not before %s (in %v)\n",
		d.Token, d.Gone, d.Until.Format(time.RFC3339Nano), d.Until.Sub(now).Round(100*time.Millisecond))
}

// revocationsStatus is what status shows of a lock's revocation records.
type revocationsStatus struct {
	Total int `json:"total"`
	// Pending are the requests whose holder still holds the lock: asked,
	// its grace period running ("pending"), or over and not forced
	// ("still-held"); oldest first.
	Pending []statusRevocation `json:"pending"`
	// Past are the newest revocationsShown others, newest first.
	Past []statusRevocation `json:"past"`

	now time.Time
}

// statusRevocation is a revocation record as stored (distlock.Revocation:
// lock, key, token, holder, by, reason, grace in nanoseconds, force,
// requested, outcome, ended), and what status adds.
type statusRevocation struct {
	distlock.Revocation
	// GraceEnds is when the holder's grace period ends (or ended).
	GraceEnds time.Time `json:"grace_ends"`
	// Holding says whether the revoked holder still holds the lock.
	Holding bool `json:"holding"`

	// leads says the revoked holder is an election's leader (asked to
	// step down by distlock revoke, or by a candidate of a higher
	// priority: a preemption), as its entry's key says.
	leads bool
}

// revocationsShown is how many past revocations status shows.
const revocationsShown = 3

// readRevocations reads the lock's revocation records, if it has any,
// and sorts them into pending and past by the queue q.
func (st *lockStatus) readRevocations(ctx context.Context, b *backend.Client, q []distlock.QueueEntry) error {
	recs, err := b.Revocations(ctx, st.Lock)
	if err != nil || len(recs) == 0 {
		return err
	}
	holding := map[string]bool{}
	for _, e := range q {
		if e.Holding {
			holding[e.Token.String()] = true
		}
	}
	rs := &revocationsStatus{Total: len(recs), Pending: []statusRevocation{}, Past: []statusRevocation{}, now: time.Now()}
	for _, r := range recs {
		sr := statusRevocation{Revocation: r, GraceEnds: r.GraceEnds().UTC(), Holding: holding[r.Token], leads: b.CandidateEntry(st.Lock, r.Key)}
		if sr.Holding && (r.Outcome == distlock.RevokePending || r.Outcome == distlock.RevokeStillHeld) {
			rs.Pending = append(rs.Pending, sr)
		}
	}
	// Records come oldest first: the past ones newest first.
	for i := len(recs) - 1; i >= 0 && len(rs.Past) < revocationsShown; i-- {
		r := recs[i]
		if holding[r.Token] && (r.Outcome == distlock.RevokePending || r.Outcome == distlock.RevokeStillHeld) {
			continue
		}
		rs.Past = append(rs.Past, statusRevocation{Revocation: r, GraceEnds: r.GraceEnds().UTC(), Holding: holding[r.Token], leads: b.CandidateEntry(st.Lock, r.Key)})
	}
	st.Revocations = rs
	return nil
}

// writePending writes a line per pending revocation, for the top of the
// text output.
func (rs *revocationsStatus) writePending(w io.Writer) {
	for _, r := range rs.Pending {
		asked := fmt.Sprintf("by %s at %s: %q", r.By, rfc3339UTC(r.Requested), r.Reason)
		what, holds, letGo, takes := "token", "holds", "let go", "takes it"
		if r.leads {
			what, holds, letGo, takes = "leader token", "leads", "step down", "deposes it"
		}
		if r.Outcome == distlock.RevokeStillHeld || !rs.now.Before(r.GraceEnds) {
			fmt.Fprintf(w, "REVOKED: %s %s still %s after its grace period ended at %s (%s ago); asked %s; 'distlock revoke --force' %s\n",
				what, r.Token, holds, rfc3339UTC(r.GraceEnds), rs.now.Sub(r.GraceEnds).Round(time.Second), asked, takes)
			continue
		}
		fmt.Fprintf(w, "REVOKED: %s %s asked to %s %s; grace %v, ends %s (in %v)\n",
			what, r.Token, letGo, asked, r.Grace, rfc3339UTC(r.GraceEnds), r.GraceEnds.Sub(rs.now).Round(time.Second))
	}
}

// writePast writes the past revocations' lines.
func (rs *revocationsStatus) writePast(w io.Writer) {
	if len(rs.Past) == 0 {
		return
	}
	fmt.Fprintf(w, "revocations: %d recorded (distlock revoke); newest past:\n", rs.Total)
	for _, r := range rs.Past {
		outcome := string(r.Outcome)
		switch {
		case r.Outcome == distlock.RevokeStillHeld && !r.Holding:
			outcome += " after the grace period, released since"
		case r.Outcome == distlock.RevokeEnded:
			outcome += " (the holder is gone; no revoker recorded how)"
		case r.ForcedBy != "":
			outcome += fmt.Sprintf(" by %s (%q)", r.ForcedBy, r.ForceReason)
		}
		if !r.Ended.IsZero() {
			outcome += " at " + rfc3339UTC(r.Ended)
		}
		force := ""
		if r.Force {
			force = ", force"
		}
		what := "token"
		if r.leads {
			what = "leader token"
		}
		fmt.Fprintf(w, "  %s %s: %s; asked by %s at %s: %q, grace %v%s\n", what, r.Token, outcome, r.By, rfc3339UTC(r.Requested), r.Reason, r.Grace, force)
	}
}

// slotsStatus is what status shows of a lock's done-markers.
type slotsStatus struct {
	Done   int                   `json:"done"`
	Newest []distlock.SlotMarker `json:"newest"`
}

// slotsShown is how many of the newest markers status shows.
const slotsShown = 3

// readSlots reads the lock's done-markers, if it has any.
func (st *lockStatus) readSlots(ctx context.Context, b *backend.Client) error {
	total, newest, err := b.SlotMarkers(ctx, st.Lock, slotsShown)
	if err != nil || total == 0 {
		return err
	}
	st.Slots = &slotsStatus{Done: total, Newest: newest}
	return nil
}

// writeText writes the markers' lines.
func (ss *slotsStatus) writeText(w io.Writer) {
	fmt.Fprintf(w, "slots done: %d (distlock once / distlock.Once markers); newest:\n", ss.Done)
	for _, m := range ss.Newest {
		fmt.Fprintf(w, "  %s by %s\n", m.Slot, m)
	}
}

// fenceStatus is the fence audit of status --fence.
type fenceStatus struct {
	Key    string `json:"key"`
	Newest string `json:"newest"`
	State  string `json:"state"`

	newest, holder distlock.Token
}

// readFence reads the fence at key and compares its newest token with the
// holder's.
func (st *lockStatus) readFence(ctx context.Context, b *backend.Client, key string) error {
	newest, err := b.FenceNewest(ctx, key, st.Lock)
	if err != nil {
		return err
	}
	fs := &fenceStatus{Key: key, newest: newest}
	if !newest.IsZero() {
		fs.Newest = newest.String()
	}
	var holder distlock.Token
	for _, e := range st.Entries {
		if e.Role == "holder" {
			holder, _ = distlock.ParseToken(e.Token)
			break
		}
	}
	fs.holder = holder
	switch {
	case holder.IsZero():
		fs.State = "free"
	case newest.IsZero():
		fs.State = "none"
	case newest.Seq == holder.Seq && newest.Owner == holder.Owner:
		fs.State = "current"
	case newest.Seq < holder.Seq:
		fs.State = "behind"
	default:
		fs.State = "ahead"
	}
	st.Fence = fs
	return nil
}

// writeText says what the fence audit found, in one line.
func (fs *fenceStatus) writeText(w io.Writer) {
	newest := "has admitted no token yet"
	if !fs.newest.IsZero() {
		newest = "newest admitted token " + fs.Newest
	}
	var what string
	switch fs.State {
	case "free":
		what = "nobody holds the lock"
	case "none":
		what = fmt.Sprintf("the holder (token %s) has written nothing through it yet", fs.holder)
	case "current":
		what = "the current holder's: its writes reach the resource"
	case "behind":
		what = fmt.Sprintf("older than the holder's %s: the holder has written nothing through the fence yet, or writes without it", fs.holder)
	case "ahead":
		what = fmt.Sprintf("NEWER than the holder's %s: a token from outside this queue (a restored or rebuilt cluster?)", fs.holder)
	}
	fmt.Fprintf(w, "fence %s: %s; %s\n", fs.Key, newest, what)
}
