// SPDX-License-Identifier: Apache-2.0

// Package hook is how lardertest reaches what package larder keeps to
// itself, and no one else can (an internal package): the test helpers hand
// a test a store made ahead, whose label they set in the background, and
// its requests must wait for that.
package hook

import "context"

// Set by package larder when it is initialised.
var (
	// Settle makes every request about store (a *larder.Store) call wait
	// first: it returns once the store is as the test may see it.
	Settle func(store any, wait func())
	// Patch sends PATCH /stores/{id} with body for store (a *larder.Store),
	// bypassing its Settle, and updates its Info from the answer.
	Patch func(ctx context.Context, store any, body map[string]any) error
	// StoreBody is the POST /stores body of opts (a larder.StoreOptions).
	StoreBody func(opts any) map[string]any
	// AnswerError is the *larder.Error of an answer of status, no success,
	// whose body is raw.
	AnswerError func(status int, raw []byte) error
	// NewStore is the *larder.Store of client (a *larder.Client) that
	// answer (a POST /stores answer's body) describes.
	NewStore func(client any, answer []byte) (any, error)
)
