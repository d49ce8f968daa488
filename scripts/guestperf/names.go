package main

import (
	"bufio"
	"fmt"
	"io"
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
