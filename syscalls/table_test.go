package syscalls

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTable checks the route table itself (STYLE: "a test checks the table itself").
func TestTable(t *testing.T) {
	rs, err := routes()
	if err != nil {
		t.Fatalf("the table must compile: %v", err)
	}
	name := regexp.MustCompile(`^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$`)
	known := map[Capability]bool{CapClockNow: true, CapKVRead: true, CapKVWrite: true, CapToolsCall: true, CapNetFetch: true}
	if len(rs) != len(table) {
		t.Fatalf("route names must be unique: %d entries, %d names", len(table), len(rs))
	}
	for _, r := range table {
		t.Run(r.name, func(t *testing.T) {
			if !name.MatchString(r.name) {
				t.Errorf("route names are area.verb: %q", r.name)
			}
			if r.doc == "" || strings.Contains(r.doc, "\n") {
				t.Errorf("every route has a one-line doc")
			}
			if r.provider.name == "" || r.provider.run == nil {
				t.Errorf("every route has a provider")
			}
			if r.auth.capability == "" || !known[r.auth.capability] {
				t.Errorf("every route makes a capability decision: %q", r.auth.capability)
			}
			area, _, _ := strings.Cut(r.name, ".")
			if capArea, _, _ := strings.Cut(string(r.auth.capability), ":"); capArea != area {
				t.Errorf("a capability grants one route family: %s requires %s", r.name, r.auth.capability)
			}
			if r.auth.approval != ApprovalNone && r.auth.approval != ApprovalOperator {
				t.Errorf("approval class is none or operator: %q", r.auth.approval)
			}
			if r.auth.effect != EffectRead && r.auth.effect != EffectWrite && r.auth.effect != EffectExternal {
				t.Errorf("side-effect class is read, write or external: %q", r.auth.effect)
			}
			if (r.check != nil || r.flow != nil) && len(r.slots) == 0 {
				t.Errorf("a route with policy or data-flow stages declares the policy slots they read")
			}
			// The router's approval and budget stages run for every route: a route that
			// did not read those slots would escape the image's approvals and budgets.
			if !slices.Contains(r.slots, SlotApproval) || !slices.Contains(r.slots, SlotBudget) {
				t.Errorf("every route reads the approval and budget slots: %v", r.slots)
			}
			// Slots are declared once each, in the order of Slots (as docs show them).
			order := Slots()
			for i := 1; i < len(r.slots); i++ {
				if slices.Index(order, r.slots[i-1]) >= slices.Index(order, r.slots[i]) {
					t.Errorf("slots %v are not in the order of Slots %v", r.slots, order)
				}
			}
			// Args schemas are closed objects: an unknown field is rejected, never ignored.
			var args map[string]any
			if err := json.Unmarshal([]byte(r.args), &args); err != nil {
				t.Fatalf("args schema: %v", err)
			}
			if args["type"] != "object" || args["additionalProperties"] != false {
				t.Errorf("args schema must be an object with additionalProperties:false")
			}
			if !json.Valid([]byte(r.result)) {
				t.Errorf("result schema is not JSON")
			}
			if rs[r.name].argsSchema == nil || rs[r.name].resultSchema == nil {
				t.Errorf("schemas are compiled once, with the table")
			}
		})
	}
}

func TestRoutesIsACopyOfTheTable(t *testing.T) {
	got := Routes()
	if len(got) != len(table) {
		t.Fatalf("Routes() has %d routes, the table %d", len(got), len(table))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].Name >= got[i].Name {
			t.Fatalf("Routes() is sorted by name")
		}
	}
	byName := map[string]Route{}
	for _, r := range got {
		byName[r.Name] = r
		if !json.Valid(r.ArgsSchema) || !json.Valid(r.ResultSchema) {
			t.Fatalf("%s: schemas are JSON", r.Name)
		}
	}
	// The capability a route requires is named after it: "area:verb" for a route of
	// its own (clock.now needs clock:now), "area:read" or "area:write" by its effect
	// for an area of several routes (kv.get needs kv:read, kv.put kv:write). Derived
	// from the table's own entries, not restated.
	for _, r := range got {
		area, verb, _ := strings.Cut(r.Name, ".")
		own := Capability(area + ":" + verb)
		byEffect := Capability(area + ":" + string(r.Effect))
		if r.Capability != own && r.Capability != byEffect {
			t.Errorf("%s requires %s; by its name it needs %s or, by its effect, %s", r.Name, r.Capability, own, byEffect)
		}
	}
	got[0].Name = "changed"
	if Routes()[0].Name == "changed" {
		t.Fatalf("Routes() must return a copy")
	}
}

// "each route declares a typed policy slot that images fill": a slot is a field of
// the image's PolicySpec (its slot tag) with a place in the manifest (Field), and
// every slot is read by some route, so no part of the image's policy governs nothing.
func TestPolicySlotsAreImageFields(t *testing.T) {
	fields := map[PolicySlot]bool{}
	st := reflect.TypeOf(PolicySpec{})
	for i := 0; i < st.NumField(); i++ {
		slot := PolicySlot(st.Field(i).Tag.Get("slot"))
		if !slices.Contains(Slots(), slot) {
			t.Errorf("PolicySpec.%s has slot tag %q, which is no slot", st.Field(i).Name, slot)
		}
		fields[slot] = true
	}
	read := map[PolicySlot]bool{}
	for _, r := range Routes() {
		for _, s := range r.Policy {
			if !fields[s] {
				t.Errorf("%s reads policy slot %q, which is no field of PolicySpec", r.Name, s)
			}
			read[s] = true
		}
	}
	for _, s := range Slots() {
		if !fields[s] || !read[s] || !strings.HasPrefix(s.Field(), "/") {
			t.Errorf("slot %q: a PolicySpec field %v, read by a route %v, in the manifest at %q", s, fields[s], read[s], s.Field())
		}
	}
}

// A route gets only the slots it declares: for every route of the table and every
// per-route slot, an image that fills the slot for that route compiles when the route
// declares it, and is refused at the slot's place in the manifest when it does not.
// Derived from Routes(), never restated.
func TestRouteSlotsAreDeclared(t *testing.T) {
	fill := map[PolicySlot]func(route string) PolicySpec{
		SlotApproval: func(r string) PolicySpec {
			return PolicySpec{RouteApprovals: map[string]ApprovalClass{r: ApprovalOperator}}
		},
		SlotBudget: func(r string) PolicySpec { return PolicySpec{RouteBudgets: map[string]int64{r: 3}} },
		SlotSize:   func(r string) PolicySpec { return PolicySpec{RouteSizes: map[string]SizeBound{r: {MaxArgsBytes: 64}}} },
	}
	for _, r := range Routes() {
		for slot, spec := range fill {
			p, probs := CompilePolicy(spec(r.Name))
			if slices.Contains(r.Policy, slot) {
				if probs != nil {
					t.Errorf("%s declares %s, yet filling it is refused: %+v", r.Name, slot, probs)
				}
				continue
			}
			if p != nil || len(probs) != 1 || probs[0].At != slot.Field()+"/"+r.Name {
				t.Errorf("%s does not declare %s, yet filling it gives %+v", r.Name, slot, probs)
			}
		}
	}
}

// "CompilePolicy checks it, every problem at once": a spec with a problem in every
// per-route slot lists each one, at its JSON pointer in the manifest.
func TestRouteSlotProblems(t *testing.T) {
	var undeclared string // a route that does not read the size slot, from the table
	for _, r := range Routes() {
		if !slices.Contains(r.Policy, SlotSize) {
			undeclared = r.Name
		}
	}
	if undeclared == "" {
		t.Fatal("every route reads the size slot; pick another way to test an undeclared slot")
	}
	_, probs := CompilePolicy(PolicySpec{
		RouteApprovals: map[string]ApprovalClass{"shell.exec": ApprovalOperator, "kv.put": "always", "external": ApprovalOperator},
		RouteBudgets:   map[string]int64{"fs": 3, "kv": -1},
		RouteSizes: map[string]SizeBound{
			undeclared: {MaxArgsBytes: 10},
			"kv.put":   {},
			"kv.get":   {MaxArgsBytes: -1, MaxResultBytes: MaxSizeBound + 1},
			"a/b~c":    {MaxArgsBytes: 1},
		},
	})
	want := []string{
		"/approvals/routes/external", "/approvals/routes/kv.put", "/approvals/routes/shell.exec",
		"/limits/syscall_budgets/fs", "/limits/syscall_budgets/kv",
		"/limits/syscall_sizes/a~1b~0c", "/limits/syscall_sizes/" + undeclared,
		"/limits/syscall_sizes/kv.get/max_args_bytes", "/limits/syscall_sizes/kv.get/max_result_bytes", "/limits/syscall_sizes/kv.put",
	}
	var got []string
	for _, p := range probs {
		got = append(got, p.At)
		if p.Message == "" {
			t.Errorf("problem at %s has no message", p.At)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("problems at\n%s\nwant\n%s\n%+v", strings.Join(got, "\n"), strings.Join(want, "\n"), probs)
	}
}

func TestKVSchemaBoundsMatchConstants(t *testing.T) {
	for _, r := range table {
		if strings.HasPrefix(r.name, "kv.") && r.name != "kv.list" &&
			!strings.Contains(r.args, `"maxLength":256`) {
			t.Errorf("%s: the key schema must say maxLength %d", r.name, MaxKVKeyBytes)
		}
	}
	if MaxKVKeyBytes != 256 || MaxKVListLimit != 1000 {
		t.Fatalf("update the schemas in the table with the constants")
	}
}
