package cluster

// keys names this cluster's etcd keys (cluster.prefix, say /memoria):
//
//	<prefix>/members/<member id>    Member (JSON), bound to the member's lease
//	<prefix>/sona/<uuid>/owner      the owning member's id, bound to its lease;
//	                                its create revision is the claim's fencing token
//	<prefix>/sona/<uuid>/head       Head (JSON): the chain's acknowledged head
//	<prefix>/sona/<uuid>/info       SonaInfo (JSON): name and creation time
//	<prefix>/names/<name>/<uuid>    empty: sonas by name, cluster-wide
//	<prefix>/backbone               backboneInfo (JSON): the backbone's sona
type keys struct{ prefix string }

func (k keys) members() string          { return k.prefix + "/members/" }
func (k keys) member(id string) string  { return k.members() + id }
func (k keys) sonas() string            { return k.prefix + "/sona/" }
func (k keys) owner(uuid string) string { return k.sonas() + uuid + "/owner" }
func (k keys) head(uuid string) string  { return k.sonas() + uuid + "/head" }
func (k keys) info(uuid string) string  { return k.sonas() + uuid + "/info" }
func (k keys) names(name string) string { return k.prefix + "/names/" + name + "/" }
func (k keys) backbone() string         { return k.prefix + "/backbone" }
