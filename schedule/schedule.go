package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// A Schedule divides time into slots, each named by a valid slot name
// (distlock.ValidateSlot).
//
// Pass Slot the time the run was scheduled for, where the scheduler says
// (gocron, a cron line's own minute); time.Now() works too, as long as a
// run never starts before its slot does by the machine's clock. A
// scheduler that may fire early (a clock stepped back, jitter before the
// mark) should add that much: s.Slot(now.Add(maxEarly)).
type Schedule interface {
	// Slot returns the name of the slot t falls in.
	Slot(t time.Time) string
	// Start returns when the slot t falls in began.
	Start(t time.Time) time.Time
}

// Hourly returns the schedule of one slot per clock hour in loc (nil:
// UTC), named like "2026-12-01T08". In loc's repeated hour at the end of
// daylight saving time both hours are one slot (Start gives the start of
// the wall-clock hour the time is in).
func Hourly(loc *time.Location) Schedule {
	return period{loc: orUTC(loc), layout: "2006-01-02T15", hour: true}
}

// Daily returns the schedule of one slot per calendar day in loc (nil:
// UTC), named like "2026-12-01". Give the fleet's business time zone, not
// each machine's own: machines in other zones then agree.
func Daily(loc *time.Location) Schedule { return period{loc: orUTC(loc), layout: "2006-01-02"} }

func orUTC(loc *time.Location) *time.Location {
	if loc == nil {
		return time.UTC
	}
	return loc
}

type period struct {
	loc    *time.Location
	layout string
	hour   bool
}

func (p period) Start(t time.Time) time.Time {
	t = t.In(p.loc)
	if p.hour {
		// Back to the wall clock's full hour by what has elapsed since:
		// time.Date would pick one of the two 02:00s in the repeated
		// hour, possibly the later one.
		return t.Add(-(time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())))
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, p.loc)
}

func (p period) Slot(t time.Time) string { return t.In(p.loc).Format(p.layout) }

// Cron returns the schedule whose slots begin at the fire times of a
// standard five-field cron expression ("30 6 * * 1-5"; also the
// descriptors "@daily", "@hourly", ...) in loc (nil: UTC): t's slot is
// the latest fire time at or before t, named by it in UTC minutes, like
// "2026-12-01T05:30Z", so that every zone names it alike. A time before
// any fire time in the five years before it has no slot: Slot returns ""
// (not a valid slot) and Start the zero Time.
func Cron(expr string, loc *time.Location) (Schedule, error) {
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("schedule: cron %q: %w", expr, err)
	}
	return cronSchedule{s: s, loc: orUTC(loc)}, nil
}

type cronSchedule struct {
	s   cron.Schedule
	loc *time.Location
}

// Start finds the latest fire time at or before t. The cron library only
// steps forward, so it steps forward from ever earlier points until a
// fire time falls in between.
func (c cronSchedule) Start(t time.Time) time.Time {
	t = t.In(c.loc)
	for _, back := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 8 * 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 367 * 24 * time.Hour} {
		var last time.Time
		// Next returns times strictly after its argument, and cron's
		// resolution is the minute.
		for n := c.s.Next(t.Add(-back - time.Nanosecond)); !n.IsZero() && !n.After(t); n = c.s.Next(n) {
			last = n
		}
		if !last.IsZero() {
			return last
		}
	}
	return time.Time{}
}

func (c cronSchedule) Slot(t time.Time) string {
	s := c.Start(t)
	if s.IsZero() {
		return ""
	}
	return s.UTC().Format("2006-01-02T15:04Z")
}
