package awslocal

import (
	"fmt"
	"strconv"
)

// This file holds what the front reads from a launch template that moto
// does not apply to the instance: network interfaces (EFA) and tenancy.

// ltInterface is one network interface a launch template lays out.
type ltInterface struct {
	Card, Device int
	// Type is EC2's interfaceType: "interface" (ENA), "efa" or "efa-only".
	Type string
}

// templateInterfaces are the interfaces of a template's data, in order.
func templateInterfaces(data *xnode) []ltInterface {
	var out []ltInterface
	for _, ni := range data.items("networkInterfaceSet") {
		card, _ := strconv.Atoi(ni.text("networkCardIndex"))
		device, _ := strconv.Atoi(ni.text("deviceIndex"))
		typ := ni.text("interfaceType")
		if typ == "" {
			typ = "interface"
		}
		out = append(out, ltInterface{Card: card, Device: device, Type: typ})
	}
	return out
}

func efaCount(ifaces []ltInterface) int {
	n := 0
	for _, ni := range ifaces {
		if ni.Type == "efa" || ni.Type == "efa-only" {
			n++
		}
	}
	return n
}

// checkInterfaces is what EC2 refuses of a template's interfaces on a
// type: EFA on a type without it, more EFA interfaces than it has, or an
// interface on a network card it lacks. The messages are ours; the codes
// are EC2's for a bad parameter combination.
func checkInterfaces(ti typeInfo, ifaces []ltInterface) (string, string) {
	if n := efaCount(ifaces); n > 0 && int64(n) > ti.EFAs {
		if ti.EFAs == 0 {
			return "InvalidParameterCombination", fmt.Sprintf("The instance type %s does not support Elastic Fabric Adapter interfaces.", ti.Name)
		}
		return "InvalidParameterCombination", fmt.Sprintf("The instance type %s supports at most %d Elastic Fabric Adapter interfaces; %d were requested.", ti.Name, ti.EFAs, n)
	}
	cards := ti.NetworkCards
	if cards == 0 {
		cards = 1
	}
	for _, ni := range ifaces {
		if int64(ni.Card) >= cards {
			return "InvalidParameterValue", fmt.Sprintf("Network card index %d is not valid for instance type %s, which has %d network card(s).", ni.Card, ti.Name, cards)
		}
	}
	return "", ""
}

// overlayInterfaces shows the instance's interfaces as the template laid
// them out (moto attaches one plain interface whatever the template says):
// the primary takes the first one's type, and every further one is listed
// with its card, device and type.
func overlayInterfaces(inst *xnode, id string, ifaces []ltInterface) {
	if len(ifaces) == 0 {
		return
	}
	set := inst.child("networkInterfaceSet")
	if set == nil {
		set = el("networkInterfaceSet")
		inst.set(set)
	}
	items := set.items()
	if len(items) == 0 {
		items = []*xnode{el("item")}
		set.Children = append(set.Children, items[0])
	}
	describe := func(item *xnode, ni ltInterface) {
		item.set(leaf("interfaceType", ni.Type))
		att := item.child("attachment")
		if att == nil {
			att = el("attachment")
			item.set(att)
		}
		att.set(leaf("deviceIndex", strconv.Itoa(ni.Device)))
		att.set(leaf("networkCardIndex", strconv.Itoa(ni.Card)))
	}
	describe(items[0], ifaces[0])
	for i, ni := range ifaces[1:] {
		item := el("item", leaf("networkInterfaceId", fmt.Sprintf("eni-%s%02d", id[2:], i+1)))
		describe(item, ni)
		set.Children = append(set.Children, item)
	}
}

// overlayTenancy shows the template's tenancy on the instance's placement:
// moto launches every instance as default tenancy.
func overlayTenancy(inst *xnode, tenancy string) {
	if tenancy == "" {
		return
	}
	placement := inst.child("placement")
	if placement == nil {
		placement = el("placement")
		inst.set(placement)
	}
	placement.set(leaf("tenancy", tenancy))
}
