package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// Contract is what the generator reads from the lab's metric contract
// (contract/metrics.json), the file every runtime reads, so its series have the
// Python and Node.js clients' names, help, labels, outcomes and buckets.
type Contract struct {
	Outcomes           []string `json:"outcomes"`
	ClientOnlyOutcomes []string `json:"client_only_outcomes"`
	GRPCClientErrors   []string `json:"grpc_client_error_codes"`
	Buckets            struct {
		Duration []float64 `json:"duration"`
		Size     []float64 `json:"size"`
	} `json:"buckets"`
	Client []struct {
		Name string `json:"name"`
		Help string `json:"help"`
	} `json:"client"`
}

// LoadContract reads metrics.json.
func LoadContract(path string) (*Contract, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-contract: %w", err)
	}
	var c Contract
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("-contract %s: %w", path, err)
	}
	if len(c.Buckets.Duration) == 0 || len(c.Outcomes) == 0 {
		return nil, fmt.Errorf("-contract %s: no duration buckets or outcomes", path)
	}
	return &c, nil
}

// Help is a client family's help text from the contract.
func (c *Contract) Help(name string) string {
	for _, f := range c.Client {
		if f.Name == name {
			return f.Help
		}
	}
	return ""
}

// ClientErrors is the set of gRPC code names counted as client_error.
func (c *Contract) ClientErrors() map[string]bool {
	set := map[string]bool{}
	for _, name := range c.GRPCClientErrors {
		set[name] = true
	}
	return set
}

// AllOutcomes is every outcome a client counts: the shared ones, then the client-only ones.
func (c *Contract) AllOutcomes() []string {
	return append(append([]string{}, c.Outcomes...), c.ClientOnlyOutcomes...)
}
