package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// failoverRounds is how many failovers each election is timed over.
var failoverRounds = pick(20, 6)

// BenchmarkElectionFailover times leader failover — the leader's session
// revoked → the waiting candidate's Campaign returns — for recipe.Election
// and etcd's concurrency.Election on the same 3-member cluster in the same
// run, alternating which goes first, and prints a markdown table. Like
// BenchmarkCompare it runs once whatever b.N; use -benchtime 1x:
//
//	go -C internal/bench test . -run '^$' -bench BenchmarkElectionFailover -benchtime 1x
//
// Each round uses a fresh election: the leader campaigns through one
// member, the other candidate through another, and once the candidate's
// entry is in and its watches have settled (every watch the candidates
// asked for confirmed, and 50 ms without a request), an outside client
// revokes the leader's lease. The time is taken from just before the
// Revoke to the candidate's Campaign returning. The table also gives the
// Revoke's own round trip (the floor under both), and the leader's
// uncontended Campaign: its latency and the requests it waited on, counted
// on its client.
func BenchmarkElectionFailover(b *testing.B) {
	etcdVerify(b)
	e := newEnv(b)
	var clis [2]*clientv3.Client
	// The first candidate's counter is for its uncontended Campaign; both
	// tell when the candidates' watches are in place.
	cands := &clientSet{counters: []*rpcCounter{newRPCCounter(), newRPCCounter()}}
	counter := cands.counters[0]
	for i := range clis {
		cli, err := e.client(e.leader+1+i, cands.counters[i]) // candidates on different members
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cli.Close() })
		clis[i] = cli
	}
	runs := [2]func(ctx context.Context, e *env, clis [2]*clientv3.Client, cands *clientSet, round int) (r failoverRound, err error){
		ours: failoverOurs, theirs: failoverTheirs,
	}
	names := [2]string{ours: "recipe.Election", theirs: "concurrency.Election"}
	var samples, revokes, firsts [2][]time.Duration
	var firstReqs [2]reqCount
	for r := range failoverRounds {
		order := [2]int{ours, theirs}
		if r%2 == 1 {
			order = [2]int{theirs, ours}
		}
		for _, i := range order {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			fr, err := runs[i](ctx, e, clis, cands, r)
			cancel()
			if err != nil {
				b.Fatalf("%s round %d: %v", names[i], r, err)
			}
			samples[i] = append(samples[i], fr.failover)
			revokes[i] = append(revokes[i], fr.revoke)
			firsts[i] = append(firsts[i], fr.firstDone.Sub(fr.firstStart))
			for _, ev := range counter.between(fr.firstStart, fr.firstDone) {
				firstReqs[i].add(ev.kind)
			}
			e.progress("%s failover %d: %v", names[i], r, fr.failover)
		}
	}
	emit(b, failoverRecords(samples, revokes, firsts)...)
	lo, lt := summarize(samples[ours]), summarize(samples[theirs])
	var t strings.Builder
	fmt.Fprintf(&t, "Leader failover (session revoked → next Campaign returns), %d rounds each, etcd %s, 3 members\n\n", failoverRounds, etcdVersion)
	fmt.Fprintf(&t, "| metric | %s | %s | ours ÷ theirs |\n|---|---|---|---|\n", names[ours], names[theirs])
	for _, m := range []struct {
		name string
		pick func(latency) time.Duration
	}{{"failover p50", p50}, {"failover p90", func(l latency) time.Duration { return l.p90 }}, {"failover max", func(l latency) time.Duration { return l.max }}} {
		fmt.Fprintf(&t, "| %s | %s | %s | %s |\n", m.name, ms(m.pick(lo)), ms(m.pick(lt)), ratio(float64(m.pick(lo)), float64(m.pick(lt))))
	}
	ro, rt := summarize(revokes[ours]), summarize(revokes[theirs])
	fmt.Fprintf(&t, "| (Revoke's own round trip, p50) | %s | %s | |\n", ms(ro.p50), ms(rt.p50))
	fo, ft := summarize(firsts[ours]), summarize(firsts[theirs])
	fmt.Fprintf(&t, "| uncontended Campaign p50 | %s | %s | %s |\n", ms(fo.p50), ms(ft.p50), ratio(float64(fo.p50), float64(ft.p50)))
	per := func(c reqCount) string {
		return fmt.Sprintf("%.1f writes + %.1f reads", float64(c.writes)/float64(failoverRounds), float64(c.reads)/float64(failoverRounds))
	}
	fmt.Fprintf(&t, "| uncontended Campaign, blocking requests | %s | %s | |\n", per(firstReqs[ours]), per(firstReqs[theirs]))
	// b.Log keeps only the first lines of a benchmark's log: the table goes
	// to stdout, as BenchmarkCompare's does, and the log gets the gist.
	fmt.Println(t.String())
	b.Logf("failover p50: ours %s, theirs %s (%s)", ms(lo.p50), ms(lt.p50), ratio(float64(lo.p50), float64(lt.p50)))
	b.ReportMetric(float64(lo.p50)/1e6, "failover-p50-ms-ours")
	b.ReportMetric(float64(lt.p50)/1e6, "failover-p50-ms-theirs")
}

// failoverRound is what one round measured: the failover, the Revoke's
// own round trip, and the first candidate's uncontended Campaign.
type failoverRound struct {
	failover, revoke      time.Duration
	firstStart, firstDone time.Time
}

// timedCampaign is a candidate's Campaign running in the background: done
// receives its error, and at is when it returned.
type timedCampaign struct {
	done chan error
	at   time.Time
}

func campaignInBackground(campaign func() error) *timedCampaign {
	c := &timedCampaign{done: make(chan error, 1)}
	go func() {
		err := campaign()
		c.at = time.Now()
		c.done <- err
	}()
	return c
}

// failover runs one round once both candidates have campaigned: it waits for
// two entries under prefix and for the candidates' watches to be in place
// (cands quiet), revokes lease and times the candidate's Campaign, and the
// Revoke's own round trip.
func (e *env) failover(ctx context.Context, prefix string, lease clientv3.LeaseID, c *timedCampaign, cands *clientSet) (d, revoke time.Duration, err error) {
	if err := e.waitKeys(ctx, prefix, 2); err != nil {
		return 0, 0, err
	}
	if err := cands.quiet(50*time.Millisecond, 10*time.Second); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := e.observer.Revoke(ctx, lease); err != nil {
		return 0, 0, err
	}
	revoke = time.Since(start)
	select {
	case err := <-c.done:
		if err != nil {
			return 0, 0, err
		}
		return c.at.Sub(start), revoke, nil
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
}

func failoverOurs(ctx context.Context, e *env, clis [2]*clientv3.Client, cands *clientSet, round int) (fr failoverRound, err error) {
	name := fmt.Sprintf("bench-election/%d", round)
	var ss [2]*etcdlock.Session
	defer func() {
		for _, s := range ss {
			if s != nil {
				s.Close(ctx)
			}
		}
	}()
	var els [2]*recipe.Election
	for i := range ss {
		s, err := etcdlock.NewSession(ctx, clis[i], etcdlock.WithTTL(sessionTTL))
		if err != nil {
			return fr, err
		}
		ss[i] = s
		if els[i], err = recipe.NewElection(s, name); err != nil {
			return fr, err
		}
	}
	fr.firstStart = time.Now()
	if _, err := els[0].Campaign(ctx, "leader"); err != nil {
		return fr, err
	}
	fr.firstDone = time.Now()
	c := campaignInBackground(func() error {
		_, err := els[1].Campaign(ctx, "next")
		return err
	})
	fr.failover, fr.revoke, err = e.failover(ctx, etcdlock.DefaultPrefix+name+"/@e", ss[0].ID(), c, cands)
	return fr, err
}

func failoverTheirs(ctx context.Context, e *env, clis [2]*clientv3.Client, cands *clientSet, round int) (fr failoverRound, err error) {
	prefix := fmt.Sprintf("/bench-election-theirs/%d", round)
	var ss [2]*concurrency.Session
	defer func() {
		for _, s := range ss {
			if s != nil {
				s.Close() // the revoked one's Revoke fails: nothing left to do
			}
		}
	}()
	var els [2]*concurrency.Election
	for i := range ss {
		s, err := concurrency.NewSession(clis[i], concurrency.WithTTL(int(sessionTTL/time.Second)))
		if err != nil {
			return fr, err
		}
		ss[i] = s
		els[i] = concurrency.NewElection(s, prefix)
	}
	fr.firstStart = time.Now()
	if err := els[0].Campaign(ctx, "leader"); err != nil {
		return fr, err
	}
	fr.firstDone = time.Now()
	c := campaignInBackground(func() error { return els[1].Campaign(ctx, "next") })
	fr.failover, fr.revoke, err = e.failover(ctx, prefix+"/", ss[0].Lease(), c, cands)
	return fr, err
}

// failoverRecords is what BenchmarkElectionFailover emits, each sample
// indexed by ours and theirs.
func failoverRecords(failovers, revokes, firsts [2][]time.Duration) []Record {
	o := &recs{bench: "election", store: "etcd"}
	for i, impl := range implNames {
		if f := summarize(failovers[i]); f.n > 0 {
			o.add(impl, "failover_p50", 0, msFloat(f.p50), "ms")
			o.add(impl, "failover_p90", 0, msFloat(f.p90), "ms")
			o.add(impl, "failover_max", 0, msFloat(f.max), "ms")
		}
		if r := summarize(revokes[i]); r.n > 0 {
			o.add(impl, "revoke_p50", 0, msFloat(r.p50), "ms")
		}
		if c := summarize(firsts[i]); c.n > 0 {
			o.add(impl, "campaign_p50", 0, msFloat(c.p50), "ms")
		}
	}
	return o.out
}
