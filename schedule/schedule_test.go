package schedule_test

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/schedule"
)

func TestSchedules(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cronOf := func(expr string, loc *time.Location) schedule.Schedule {
		t.Helper()
		s, err := schedule.Cron(expr, loc)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name  string
		s     schedule.Schedule
		t     string
		slot  string
		start string
	}{
		{"daily UTC", schedule.Daily(nil), "2026-12-01T23:59:59Z", "2026-12-01", "2026-12-01T00:00:00Z"},
		// 23:30 UTC is already the next day in Berlin.
		{"daily Berlin", schedule.Daily(berlin), "2026-12-01T23:30:00Z", "2026-12-02", "2026-12-01T23:00:00Z"},
		{"hourly", schedule.Hourly(nil), "2026-12-01T08:59:59Z", "2026-12-01T08", "2026-12-01T08:00:00Z"},
		// The repeated hour when daylight saving time ends is one slot.
		{"hourly Berlin CEST 02:30", schedule.Hourly(berlin), "2026-10-25T00:30:00Z", "2026-10-25T02", "2026-10-25T00:00:00Z"},
		{"hourly Berlin CET 02:30", schedule.Hourly(berlin), "2026-10-25T01:30:00Z", "2026-10-25T02", "2026-10-25T01:00:00Z"},
		// 06:30 Berlin is 05:30 UTC in winter.
		{"cron after today's fire", cronOf("30 6 * * *", berlin), "2026-12-01T06:00:00Z", "2026-12-01T05:30Z", "2026-12-01T05:30:00Z"},
		{"cron at the fire time", cronOf("30 6 * * *", berlin), "2026-12-01T05:30:00Z", "2026-12-01T05:30Z", "2026-12-01T05:30:00Z"},
		{"cron just before", cronOf("30 6 * * *", berlin), "2026-12-01T05:29:59Z", "2026-11-30T05:30Z", "2026-11-30T05:30:00Z"},
		{"cron weekdays, on a Sunday", cronOf("0 9 * * 1-5", nil), "2026-12-06T12:00:00Z", "2026-12-04T09:00Z", "2026-12-04T09:00:00Z"},
		{"cron monthly", cronOf("@monthly", nil), "2026-12-17T12:00:00Z", "2026-12-01T00:00Z", "2026-12-01T00:00:00Z"},
		{"cron every 5 minutes", cronOf("*/5 * * * *", nil), "2026-12-01T08:04:59Z", "2026-12-01T08:00Z", "2026-12-01T08:00:00Z"},
	} {
		tt := at(c.t)
		if got := c.s.Slot(tt); got != c.slot {
			t.Errorf("%s: Slot(%s) = %q, want %q", c.name, c.t, got, c.slot)
		}
		if got := c.s.Start(tt); !got.Equal(at(c.start)) {
			t.Errorf("%s: Start(%s) = %v, want %s", c.name, c.t, got, c.start)
		}
		if err := distlock.ValidateSlot(c.s.Slot(tt)); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		// Any instant of the slot names it the same: instances with
		// skewed clocks or jittered starts agree.
		if got := c.s.Slot(c.s.Start(tt)); got != c.slot {
			t.Errorf("%s: the slot's own start is in slot %q, want %q", c.name, got, c.slot)
		}
	}
	if _, err := schedule.Cron("not cron", nil); err == nil {
		t.Error("Cron accepted a malformed expression")
	}
	// Fire times only before the search window: no slot.
	feb29 := cronOf("0 0 29 2 *", nil)
	if s := feb29.Slot(at("2026-03-01T00:00:00Z")); s != "2024-02-29T00:00Z" {
		t.Errorf("leap-day cron: slot %q, want 2024-02-29T00:00Z", s)
	}
}
