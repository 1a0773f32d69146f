package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// Scenario is one named run configuration of the long suite.
type Scenario struct {
	Name   string
	Config Config
}

// Workloads returns one of every workload.
func Workloads() []Workload {
	return []Workload{&RegisterWorkload{}, RWWorkload{}, &ElectionWorkload{}, SemaphoreWorkload{}, &MultiWorkload{}}
}

// Scenarios returns the long suite's scenarios for a store: for every
// workload, the fault-free run, every nemesis that applies on its own, and
// all of them combined at random.
func Scenarios(store string) []Scenario {
	var out []Scenario
	for _, w := range Workloads() {
		_, hooks := w.(holderHooks)
		out = append(out, Scenario{Name: w.Name() + "/none", Config: Config{Workload: w}})
		var all []Nemesis
		for _, n := range AllNemeses() {
			if strings.HasPrefix(n.Name(), "zk-") && store != ZooKeeper || strings.HasPrefix(n.Name(), "etcd-") && store != Etcd {
				continue
			}
			if n.Name() == NemHolderPause && !hooks {
				continue
			}
			all = append(all, n)
			out = append(out, Scenario{Name: w.Name() + "/" + n.Name(), Config: Config{Workload: w, Nemeses: []Nemesis{n}}})
		}
		out = append(out, Scenario{Name: w.Name() + "/mixed", Config: Config{Workload: w, Nemeses: all, Combine: true}})
	}
	return out
}

// Summary renders results as a markdown table: one row per run, with the
// operations, the faults injected and what the checkers saw.
func Summary(results []*Result) string {
	var b strings.Builder
	b.WriteString("| store | workload | nemesis | seed | ops (ok / unknown) | faults | locks lost | checks passed | violations (fenced) | unfenced control |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		nem := "none"
		if len(r.Nemeses) > 0 {
			nem = strings.Join(r.Nemeses, "+")
			if len(r.Nemeses) > 3 {
				nem = fmt.Sprintf("mixed (%d kinds, combined)", len(r.Nemeses))
			}
		}
		var faults []string
		for k, v := range r.Faults {
			faults = append(faults, fmt.Sprintf("%s×%d", k, v))
		}
		sort.Strings(faults)
		pass, total := 0, 0
		var viol, control []string
		for _, c := range r.Checks {
			if c.Control {
				if !c.OK {
					control = append(control, fmt.Sprintf("%s: %d", c.Name, c.Violations))
				}
				continue
			}
			total++
			if c.OK {
				pass++
			} else {
				viol = append(viol, fmt.Sprintf("%s[%s]: %d", c.Name, c.Subject, c.Violations))
			}
		}
		v := "0"
		if len(viol) > 0 {
			v = "**" + strings.Join(viol, ", ") + "**"
		}
		ctl := "not flagged"
		if len(control) > 0 {
			ctl = "flagged (" + strings.Join(control, ", ") + ")"
		}
		fs := strings.Join(faults, ", ")
		if fs == "" {
			fs = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d (%d / %d) | %s | %d | %d/%d | %s | %s |\n",
			r.Store, r.Workload, nem, r.Seed, r.Ops, r.OKs, r.Infs, fs, r.Lost, pass, total, v, ctl)
	}
	return b.String()
}
