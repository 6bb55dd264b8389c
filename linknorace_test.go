//go:build !race

package fi

const raceBuild = false
