package chaos_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/integration/chaos"
)

// Run the register workload on a ZooKeeper ensemble for a minute, under
// paused lock holders and partitions of the leader, and print what the
// checkers saw. The unfenced control is expected to fail; the fenced
// registers must not.
func ExampleRun() {
	nemeses, err := chaos.Nemeses(chaos.NemHolderPause, chaos.NemIsolateLeader)
	if err != nil {
		log.Fatal(err)
	}
	res, err := chaos.Run(context.Background(), chaos.Config{
		Store:    chaos.ZooKeeper,
		Nemeses:  nemeses,
		Duration: time.Minute,
		Seed:     42, // the same seed replays the same fault schedule
		Out:      "chaos-out",
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range res.Checks {
		fmt.Println(c)
	}
	fmt.Print(chaos.Summary([]*chaos.Result{res}))
	if !res.OK(false) {
		log.Fatalf("violations; history in %s", res.History)
	}
}
