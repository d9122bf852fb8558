package sqlcommon

import "github.com/vigilhq/vigil/persistence"

// NamespaceColumns are the namespace columns in the order ScanNamespace reads them.
const NamespaceColumns = `name, id, data, version, create_time, update_time`

// ScanNamespace reads one namespace row (NamespaceColumns) through scan, a row's Scan.
func ScanNamespace(scan func(dest ...any) error) (*persistence.NamespaceRecord, error) {
	ns := &persistence.NamespaceRecord{}
	var created, updated int64
	if err := scan(&ns.Name, &ns.ID, &ns.Data, &ns.Version, &created, &updated); err != nil {
		return nil, err
	}
	ns.CreateTime = FromOptionalTime(created)
	ns.UpdateTime = FromOptionalTime(updated)
	return ns, nil
}
