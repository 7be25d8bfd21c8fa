package schemas

import (
	"fmt"
	"strconv"
	"strings"
)

// Step addresses name a step of a journey version for as long as the
// version exists (versions are immutable), so an execution stores its
// position as one: "0" is the first top-level step, "2.then.0" the first
// step of the then arm of top-level step 2, "2.then.0.onTimeout.1" deeper
// still. The execution engine moves with FirstStep, Enter and Next.

// FirstStep is the address an execution starts at; ok is false for a
// definition without steps (ParseJourney refuses those).
func (d *JourneyDefinition) FirstStep() (addr string, ok bool) {
	if len(d.Steps) == 0 {
		return "", false
	}
	return "0", true
}

// StepAt returns the step at addr, or an error naming what does not exist.
func (d *JourneyDefinition) StepAt(addr string) (*JourneyStep, error) {
	steps := d.Steps
	parts := strings.Split(addr, ".")
	for i := 0; ; i += 2 {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 || strconv.Itoa(n) != parts[i] {
			return nil, fmt.Errorf("step address %q: %q is not a step index", addr, parts[i])
		}
		if n >= len(steps) {
			return nil, fmt.Errorf("step address %q: no step %d there", addr, n)
		}
		s := &steps[n]
		if i+1 == len(parts) {
			return s, nil
		}
		if i+2 == len(parts) {
			return nil, fmt.Errorf("step address %q: arm %q without a step index", addr, parts[i+1])
		}
		found := false
		for _, a := range s.arms() {
			if a.name == parts[i+1] {
				steps, found = a.steps, true
			}
		}
		if !found {
			return nil, fmt.Errorf("step address %q: a %s step has no arm %q", addr, s.Type, parts[i+1])
		}
	}
}

// Enter returns the address an execution moves to when the step at addr
// takes arm (then, else, onEvent, onTimeout): the arm's first step, or,
// for an empty arm, the step after addr (Next). done reports that the
// journey has no step left.
func (d *JourneyDefinition) Enter(addr, arm string) (next string, done bool, err error) {
	s, err := d.StepAt(addr)
	if err != nil {
		return "", false, err
	}
	found := false
	for _, a := range s.arms() {
		if a.name == arm {
			found = true
			if len(a.steps) > 0 {
				return addr + "." + arm + ".0", false, nil
			}
		}
	}
	if !found {
		return "", false, fmt.Errorf("step %s (%s) has no arm %q", addr, s.Type, arm)
	}
	return d.Next(addr)
}

// Next returns the address of the step that follows the one at addr once
// it is done: its next sibling, else the step after the step holding its
// arm, and so on outwards. done reports that the journey has no step left
// (the execution completes).
func (d *JourneyDefinition) Next(addr string) (next string, done bool, err error) {
	if _, err := d.StepAt(addr); err != nil {
		return "", false, err
	}
	for {
		cut := strings.LastIndexByte(addr, '.')
		prefix, last := "", addr
		if cut >= 0 {
			prefix, last = addr[:cut+1], addr[cut+1:]
		}
		n, _ := strconv.Atoi(last)
		sibling := prefix + strconv.Itoa(n+1)
		if _, err := d.StepAt(sibling); err == nil {
			return sibling, false, nil
		}
		if prefix == "" {
			return "", true, nil
		}
		// Leave the arm: continue after the step that holds it.
		parent := strings.TrimSuffix(prefix, ".")
		parent = parent[:strings.LastIndexByte(parent, '.')]
		addr = parent
	}
}
