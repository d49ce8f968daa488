package syscalls

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// compileRouteSlots checks and compiles the per-route slots of spec (approval, budget,
// size) against the table: every key must name something (a route, an area, a
// side-effect class for approvals, BudgetAll for budgets and sizes) and cover at
// least one route that declares the slot; a route gets only the slots it declares.
// Problems go to add with their place in the manifest.
func compileRouteSlots(spec PolicySpec, rs map[string]*route, add func(at, format string, args ...any)) map[string]*routePolicy {
	out := map[string]*routePolicy{}
	get := func(name string) *routePolicy {
		if out[name] == nil {
			out[name] = &routePolicy{}
		}
		return out[name]
	}

	for _, k := range sortedNames(spec.RouteApprovals) {
		at := SlotApproval.Field() + "/" + escape(k)
		class := spec.RouteApprovals[k]
		if class != ApprovalNone && class != ApprovalOperator {
			add(at, "%q is not an approval class (none or operator)", class)
			continue
		}
		covered, known := routesOf(rs, k, SlotApproval)
		switch {
		case !known:
			add(at, "%q is not a route, a route area, read or write", k)
		case len(covered) == 0:
			add(at, "%q covers no route that reads the %s slot (%s)", k, SlotApproval, readers(rs, SlotApproval))
		case class == ApprovalOperator:
			for _, r := range covered {
				get(r.name).operator = true
			}
		}
	}

	for _, k := range sortedNames(spec.RouteBudgets) {
		at := SlotBudget.Field() + "/" + escape(k)
		limit := spec.RouteBudgets[k]
		if limit < 0 {
			add(at, "%d is not a number of calls (0 or more)", limit)
			continue
		}
		covered, known := routesOf(rs, k, SlotBudget)
		switch {
		case !known:
			add(at, "%q is not %q, a route area or a route", k, BudgetAll)
		case len(covered) == 0:
			add(at, "%q covers no route that reads the %s slot (%s)", k, SlotBudget, readers(rs, SlotBudget))
		default:
			for _, r := range covered {
				rp := get(r.name)
				if rp.budgets == nil {
					rp.budgets = map[string]int64{}
				}
				rp.budgets[k] = limit
			}
		}
	}

	for _, k := range sortedNames(spec.RouteSizes) {
		at := SlotSize.Field() + "/" + escape(k)
		b := spec.RouteSizes[k]
		ok := true
		for _, f := range []struct {
			name string
			v    int64
		}{{"max_args_bytes", b.MaxArgsBytes}, {"max_result_bytes", b.MaxResultBytes}} {
			if f.v < 0 || f.v > MaxSizeBound {
				add(at+"/"+f.name, "%d is not in [1, %d]", f.v, MaxSizeBound)
				ok = false
			}
		}
		if b.MaxArgsBytes == 0 && b.MaxResultBytes == 0 {
			add(at, "a size bound needs max_args_bytes or max_result_bytes")
			ok = false
		}
		covered, known := routesOf(rs, k, SlotSize)
		switch {
		case !known:
			add(at, "%q is not %q, a route area or a route", k, BudgetAll)
		case len(covered) == 0:
			add(at, "%q covers no route that reads the %s slot (%s)", k, SlotSize, readers(rs, SlotSize))
		case ok:
			for _, r := range covered {
				rp := get(r.name)
				rp.maxArgs = tighter(rp.maxArgs, b.MaxArgsBytes)
				rp.maxResult = tighter(rp.maxResult, b.MaxResultBytes)
			}
		}
	}
	return out
}

// routesOf resolves key of slot to the routes it covers that declare the slot; known
// is false when the key names nothing the slot accepts. Approvals take a route, an
// area or a side-effect class (read, write); budgets and sizes a route, an area or
// BudgetAll.
func routesOf(rs map[string]*route, key string, slot PolicySlot) (covered []*route, known bool) {
	for _, name := range sortedNames(rs) {
		r := rs[name]
		area, _, _ := strings.Cut(r.name, ".")
		matches := key == r.name || key == area
		if slot == SlotApproval {
			matches = matches || (key == string(r.auth.effect) && (key == string(EffectRead) || key == string(EffectWrite)))
		} else {
			matches = matches || key == BudgetAll
		}
		if !matches {
			continue
		}
		known = true
		if slices.Contains(r.slots, slot) {
			covered = append(covered, r)
		}
	}
	if slot == SlotApproval && (key == string(EffectRead) || key == string(EffectWrite)) {
		known = true
	}
	if slot != SlotApproval && key == BudgetAll {
		known = true
	}
	return covered, known
}

// readers names the routes that declare slot, for a problem's message.
func readers(rs map[string]*route, slot PolicySlot) string {
	var names []string
	for _, name := range sortedNames(rs) {
		if slices.Contains(rs[name].slots, slot) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "no route reads it"
	}
	return "routes that do: " + strings.Join(names, ", ")
}

// tighter is the smaller of two bounds, where 0 is no bound.
func tighter(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

func (p *Policy) route(name string) *routePolicy {
	if p == nil {
		return nil
	}
	return p.routes[name]
}

// operatorApproval reports whether the image raises route name to operator approval.
func (p *Policy) operatorApproval(name string) bool {
	rp := p.route(name)
	return rp != nil && rp.operator
}

// budgets are the image's budgets that count a call of route name, by budget name.
func (p *Policy) budgets(name string) map[string]int64 {
	if rp := p.route(name); rp != nil {
		return rp.budgets
	}
	return nil
}

// sizeBound is the tightest size bound of route name (zero fields: none).
func (p *Policy) sizeBound(name string) SizeBound {
	if rp := p.route(name); rp != nil {
		return SizeBound{MaxArgsBytes: rp.maxArgs, MaxResultBytes: rp.maxResult}
	}
	return SizeBound{}
}

// ExplainRoutes describes what the image's approval, budget and size slots say of
// each route, one line per route the image says anything of, in the table's order.
func (p *Policy) ExplainRoutes() []string {
	var out []string
	for _, r := range Routes() {
		rp := p.route(r.Name)
		if rp == nil {
			continue
		}
		var parts []string
		if rp.operator && r.Approval != ApprovalOperator {
			parts = append(parts, "operator approval ("+SlotApproval.FieldName()+")")
		}
		if len(rp.budgets) > 0 {
			var bs []string
			for _, n := range []string{r.Name, strings.SplitN(r.Name, ".", 2)[0], BudgetAll} {
				if l, ok := rp.budgets[n]; ok {
					bs = append(bs, fmt.Sprintf("%d (%s)", l, n))
				}
			}
			parts = append(parts, "at most "+strings.Join(bs, ", ")+" calls ("+SlotBudget.FieldName()+")")
		}
		var sz []string
		if rp.maxArgs > 0 {
			sz = append(sz, "arguments up to "+strconv.FormatInt(rp.maxArgs, 10)+" bytes")
		}
		if rp.maxResult > 0 {
			sz = append(sz, "results up to "+strconv.FormatInt(rp.maxResult, 10)+" bytes")
		}
		if len(sz) > 0 {
			parts = append(parts, strings.Join(sz, ", ")+" ("+SlotSize.FieldName()+")")
		}
		if len(parts) > 0 {
			out = append(out, "route "+r.Name+": "+strings.Join(parts, "; "))
		}
	}
	if len(out) == 0 {
		return []string{"routes: no approval raised, no syscall budget, no size bound"}
	}
	return out
}
