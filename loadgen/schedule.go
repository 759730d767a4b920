package main

import (
	"math"
	"math/rand"
	"time"
)

// Schedule gives each call's intended start, as an offset from the run's start: evenly spaced at
// rate calls/s, or a Poisson process of that rate (independent exponential gaps), so calls arrive
// whether or not earlier ones have been answered (an open loop, free of coordinated omission).
type Schedule struct {
	rate    float64
	poisson bool
	rng     *rand.Rand
	n       int
	at      time.Duration
}

// NewSchedule starts a schedule of rate calls/s; seed makes a Poisson schedule repeatable.
func NewSchedule(rate float64, poisson bool, seed int64) *Schedule {
	return &Schedule{rate: rate, poisson: poisson, rng: rand.New(rand.NewSource(seed))}
}

// Next is the intended start of the next call. Even spacing computes each start from its index,
// so rounding never accumulates over a long run.
func (s *Schedule) Next() time.Duration {
	if s.poisson {
		s.at += time.Duration(s.rng.ExpFloat64() / s.rate * float64(time.Second))
		return s.at
	}
	at := time.Duration(math.Round(float64(s.n) * float64(time.Second) / s.rate))
	s.n++
	return at
}
