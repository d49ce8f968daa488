package srcpos

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// ErrSourceMap reports a source map that cannot be decoded.
var ErrSourceMap = errors.New("jsbundle: invalid source map")

// segment maps one generated column to an original position (all 0-based).
type segment struct {
	genCol, origLine, origCol int
}

// SourceMap is a decoded version-3 source map of a single source, as esbuild's Transform
// writes it. Only the mappings are kept; names and contents are not needed here.
type SourceMap struct {
	lines [][]segment // indexed by 0-based generated line
}

// ParseSourceMap decodes the JSON text of a source map.
func ParseSourceMap(text []byte) (*SourceMap, error) {
	var raw struct {
		Version  int      `json:"version"`
		Sources  []string `json:"sources"`
		Mappings string   `json:"mappings"`
	}
	if err := json.Unmarshal(text, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSourceMap, err)
	}
	if raw.Version != 3 {
		return nil, fmt.Errorf("%w: version %d", ErrSourceMap, raw.Version)
	}
	m := &SourceMap{}
	var cur []segment
	var genCol, src, origLine, origCol, name int
	s := raw.Mappings
	for i := 0; i <= len(s); {
		if i == len(s) || s[i] == ';' {
			m.lines = append(m.lines, cur)
			cur = nil
			genCol = 0
			i++
			if i > len(s) {
				break
			}
			continue
		}
		if s[i] == ',' {
			i++
			continue
		}
		var fields [5]int
		n := 0
		for i < len(s) && s[i] != ',' && s[i] != ';' {
			if n == len(fields) {
				return nil, fmt.Errorf("%w: segment too long", ErrSourceMap)
			}
			v, next, err := vlq(s, i)
			if err != nil {
				return nil, err
			}
			fields[n] = v
			n++
			i = next
		}
		switch n {
		case 1:
			genCol += fields[0]
			continue // a generated position with no original: nothing to record
		case 4, 5:
			genCol += fields[0]
			src += fields[1]
			origLine += fields[2]
			origCol += fields[3]
			if n == 5 {
				name += fields[4]
			}
		default:
			return nil, fmt.Errorf("%w: segment of %d fields", ErrSourceMap, n)
		}
		if src != 0 || genCol < 0 || origLine < 0 || origCol < 0 {
			return nil, fmt.Errorf("%w: segment out of range", ErrSourceMap)
		}
		cur = append(cur, segment{genCol, origLine, origCol})
	}
	for _, l := range m.lines {
		sort.SliceStable(l, func(a, b int) bool { return l[a].genCol < l[b].genCol })
	}
	return m, nil
}

// Original returns the 0-based original line and column of the mapping that covers the
// 0-based generated line and column: the last segment on that line at or before the
// column, or failing that the nearest segment on an earlier line.
func (m *SourceMap) Original(genLine, genCol int) (line, col int, ok bool) {
	if genLine >= len(m.lines) {
		genLine = len(m.lines) - 1
		genCol = int(^uint(0) >> 1)
	}
	for l := genLine; l >= 0; l-- {
		segs := m.lines[l]
		if l != genLine {
			if len(segs) > 0 {
				s := segs[len(segs)-1]
				return s.origLine, s.origCol, true
			}
			continue
		}
		i := sort.Search(len(segs), func(i int) bool { return segs[i].genCol > genCol })
		if i > 0 {
			s := segs[i-1]
			return s.origLine, s.origCol, true
		}
	}
	return 0, 0, false
}

const base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

var base64Value = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(base64); i++ {
		t[base64[i]] = int8(i)
	}
	return t
}()

// vlq decodes one base64 VLQ value of s starting at i.
func vlq(s string, i int) (value, next int, err error) {
	shift := 0
	result := 0
	for {
		if i >= len(s) {
			return 0, 0, fmt.Errorf("%w: truncated VLQ", ErrSourceMap)
		}
		d := base64Value[s[i]]
		if d < 0 {
			return 0, 0, fmt.Errorf("%w: bad VLQ digit %q", ErrSourceMap, s[i])
		}
		i++
		if shift > 28 {
			return 0, 0, fmt.Errorf("%w: VLQ overflow", ErrSourceMap)
		}
		result |= int(d&31) << shift
		shift += 5
		if d&32 == 0 {
			break
		}
	}
	if result&1 != 0 {
		return -(result >> 1), i, nil
	}
	return result >> 1, i, nil
}
