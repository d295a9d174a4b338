// Package standin serves, on the host's loopback, a stand-in for the hosts
// a published Terminal-Bench 2 verifier fetches its tools from:
//
//	curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
//	source $HOME/.local/bin/env
//	uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
//
// astral.sh serves an installer that fetches a uv release from github.com;
// the release holds a small uvx of ours (Python) that resolves its
// requirements on pypi.org's simple index, downloads the wheels from
// files.pythonhosted.org, unpacks them and runs the tool with the image's
// own pythonVERSION (the real uv would fetch a managed Python). The pytest
// wheel is made when the server starts from a directory holding pytest,
// pluggy, iniconfig and packaging (a Debian root's dist-packages);
// pytest-json-ctrf's is a plugin of ours that writes the CTRF report the
// real one writes. Every name is served over HTTPS by one server whose
// certificate a CA of its own signs: a harness reaches it with HostMap
// (proctor's --host-map, as curl --resolve) and trusts it with CAFile
// (--ca-file). Nothing here reaches the real hosts.
//
// It is for tests (testcorpus.StartInternet) and the examples
// (examples/tb/internet: the demo's and CI's internet). It must never be
// imported by code that ships in the proctor binary (cmd/proctor's
// TestBinaryDeps checks).
package standin
