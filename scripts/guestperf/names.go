package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// parseLinkMap reads the names of a module's functions, in code-section order, from the
// map wasm-ld writes with --Map. The map has three columns (address, file offset, size)
// and then a name whose indentation says what it is: an output section (CODE, DATA…),
// an input chunk ("obj/quickjs.o:(JS_CallInternal)": one function in the CODE section)
// or a symbol inside it. The guest is linked with --strip-all, so it carries no name
// section; the map of the same link names its functions without changing a byte of it.
func parseLinkMap(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var names []string
	inCode, header := false, true
	for sc.Scan() {
		line := sc.Text()
		if header { // "    Addr      Off     Size Out     In      Symbol"
			header = false
			continue
		}
		name, depth, ok := mapName(line)
		if !ok {
			continue
		}
		switch depth {
		case 0:
			inCode = name == "CODE"
		case 1:
			if !inCode {
				continue
			}
			// "file:(function)"; the function may itself contain parentheses.
			i := strings.Index(name, ":(")
			if i < 0 || !strings.HasSuffix(name, ")") {
				return nil, fmt.Errorf("link map: CODE entry %q is not file:(function)", name)
			}
			names = append(names, name[i+2:len(name)-1])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("link map: no CODE section entries")
	}
	return names, nil
}

// mapName splits a map line into its name and depth (0 output section, 1 input chunk,
// 2 symbol), from the spaces between the size column and the name: 1, 9 and 17.
func mapName(line string) (string, int, bool) {
	rest := line
	for range 3 { // address, offset, size
		rest = strings.TrimLeft(rest, " ")
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			return "", 0, false
		}
		rest = rest[i:]
	}
	name := strings.TrimLeft(rest, " ")
	switch len(rest) - len(name) {
	case 1:
		return name, 0, true
	case 9:
		return name, 1, true
	case 17:
		return name, 2, true
	}
	return "", 0, false
}

// mapChunk finds an input chunk of the link map by its section name (for example
// ".rodata.JS_CallInternal.dispatch_table") and returns its address in linear memory and
// its size. (The map's file offsets of data are not exact: they are computed before the
// data section's LEB128 sizes are final, 4 bytes short here; dataAt reads the module.)
func mapChunk(r io.Reader, section string) (addr, size int64, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		name, depth, ok := mapName(sc.Text())
		if !ok || depth != 1 || !strings.HasSuffix(name, ":("+section+")") {
			continue
		}
		f := strings.Fields(sc.Text())
		addr, err1 := strconv.ParseInt(f[0], 16, 64)
		size, err2 := strconv.ParseInt(f[2], 16, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("link map: bad line %q", sc.Text())
		}
		return addr, size, nil
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, fmt.Errorf("link map: no chunk %s", section)
}

// dataAt returns the size bytes an active data segment of module m puts at address addr
// of memory 0.
func dataAt(m []byte, addr, size int64) ([]byte, error) {
	if len(m) < 8 || string(m[:4]) != "\x00asm" {
		return nil, fmt.Errorf("not a wasm module")
	}
	p := 8
	uleb := func() (uint64, error) {
		var v uint64
		for shift := 0; p < len(m) && shift < 64; shift += 7 {
			b := m[p]
			p++
			v |= uint64(b&0x7f) << shift
			if b&0x80 == 0 {
				return v, nil
			}
		}
		return 0, fmt.Errorf("bad LEB128 at %d", p)
	}
	sleb := func() (int64, error) {
		var v int64
		shift := 0
		for p < len(m) && shift < 64 {
			b := m[p]
			p++
			v |= int64(b&0x7f) << shift
			shift += 7
			if b&0x80 == 0 {
				if shift < 64 && b&0x40 != 0 {
					v |= -1 << shift
				}
				return v, nil
			}
		}
		return 0, fmt.Errorf("bad LEB128 at %d", p)
	}
	for p < len(m) {
		id := m[p]
		p++
		n, err := uleb()
		if err != nil {
			return nil, err
		}
		end := p + int(n)
		if id != 11 {
			p = end
			continue
		}
		count, err := uleb()
		if err != nil {
			return nil, err
		}
		for range count {
			flags, err := uleb()
			if err != nil {
				return nil, err
			}
			var at int64 = -1
			if flags == 0 || flags == 2 {
				if flags == 2 {
					if _, err := uleb(); err != nil {
						return nil, err
					}
				}
				if p >= len(m) || m[p] != 0x41 { // i32.const
					return nil, fmt.Errorf("data segment offset is not i32.const")
				}
				p++
				if at, err = sleb(); err != nil {
					return nil, err
				}
				if p >= len(m) || m[p] != 0x0b {
					return nil, fmt.Errorf("data segment offset expression does not end")
				}
				p++
			}
			l, err := uleb()
			if err != nil {
				return nil, err
			}
			if at >= 0 && addr >= at && addr+size <= at+int64(l) {
				start := p + int(addr-at)
				return m[start : start+int(size)], nil
			}
			p += int(l)
		}
		return nil, fmt.Errorf("no active data segment holds %#x+%d", addr, size)
	}
	return nil, fmt.Errorf("no data section")
}
