package answerscan_test

import (
	"encoding/json"
	"fmt"

	"github.com/proctor-sandbox/proctor/internal/answerscan"
)

func Example() {
	x, err := answerscan.Build(answerscan.Material{
		Hidden: []answerscan.Doc{
			{Name: "tests/test_outputs.py", Data: []byte("import subprocess\n\ndef test_hello():\n    out = subprocess.check_output([\"python3\", \"/app/hello.py\"], text=True)\n    assert out.strip() == \"hello, proctor\"\n")},
		},
		Quoted: []answerscan.Doc{{Name: "instruction.md", Data: []byte("Write /app/hello.py: it prints \"hello, proctor\".\n")}},
	})
	if err != nil {
		panic(err)
	}
	s := x.NewScan()
	// An honest request: the instruction, quoted.
	s.Request([]byte(`{"messages":[{"role":"user","content":"Write /app/hello.py: it prints \"hello, proctor\"."}]}`), "")
	// A scaffold that knows the test.
	prompt, _ := json.Marshal("The grader runs: out = subprocess.check_output([\"python3\", \"/app/hello.py\"], text=True)")
	s.Request([]byte(`{"system":`+string(prompt)+`}`), "POST /v1/messages")
	for _, h := range s.Hits() {
		fmt.Println(h.Where+":", h.Detail())
	}
	// Output:
	// model request #2: tests/test_outputs.py:4 (1 line, 66 characters); POST /v1/messages
}
