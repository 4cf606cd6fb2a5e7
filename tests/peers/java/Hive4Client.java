import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStoreClient;
import org.apache.hadoop.hive.metastore.api.Database;
import org.apache.hadoop.hive.metastore.api.FieldSchema;
import org.apache.hadoop.hive.metastore.api.GetPartitionsFilterSpec;
import org.apache.hadoop.hive.metastore.api.GetPartitionsRequest;
import org.apache.hadoop.hive.metastore.api.GetProjectionsSpec;
import org.apache.hadoop.hive.metastore.api.PartitionFilterMode;
import org.apache.hadoop.hive.metastore.api.PartitionSpec;
import org.apache.hadoop.hive.metastore.api.PartitionsByExprRequest;
import org.apache.hadoop.hive.metastore.api.HiveObjectRef;
import org.apache.hadoop.hive.metastore.api.HiveObjectType;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.api.PrincipalType;
import org.apache.hadoop.hive.metastore.api.Role;
import org.apache.hadoop.hive.metastore.api.SerDeInfo;
import org.apache.hadoop.hive.metastore.api.StorageDescriptor;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;

/**
 * Hive 4's own metastore client (HiveMetaStoreClient) against a metastore: one line per step,
 * "STEP name OK value" or "STEP name ERROR exception: message", so a test sees which calls a real
 * Hive 4 client makes work. Arguments: the thrift URI, the warehouse directory, a database name.
 */
public class Hive4Client {
  interface Step {
    Object run() throws Exception;
  }

  static void step(String name, Step body) {
    try {
      Object value = body.run();
      System.out.println("STEP " + name + " OK " + String.valueOf(value).replace('\n', ' '));
    } catch (Throwable error) {
      String message = String.valueOf(error.getMessage()).replace('\n', ' ');
      System.out.println("STEP " + name + " ERROR " + error.getClass().getSimpleName() + ": " + message);
    }
    System.out.flush();
  }

  static Table table(String db, String name, String location) {
    SerDeInfo serde = new SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", new HashMap<>());
    serde.setDescription("text rows");
    StorageDescriptor sd = new StorageDescriptor(
        Arrays.asList(new FieldSchema("id", "bigint", null), new FieldSchema("name", "string", null)),
        location, "org.apache.hadoop.mapred.TextInputFormat",
        "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat", false, -1, serde,
        new ArrayList<>(), new ArrayList<>(), new HashMap<>());
    Table table = new Table(name, db, "hive", 0, 0, 0, sd,
        Arrays.asList(new FieldSchema("ds", "string", null)), new HashMap<>(), null, null, "MANAGED_TABLE");
    return table;
  }

  public static void main(String[] args) throws Exception {
    String uri = args[0];
    String warehouse = args[1];
    String db = args[2];
    Configuration conf = MetastoreConf.newMetastoreConf();
    MetastoreConf.setVar(conf, MetastoreConf.ConfVars.THRIFT_URIS, uri);
    MetastoreConf.setLongVar(conf, MetastoreConf.ConfVars.THRIFT_CONNECTION_RETRIES, 1);
    HiveMetaStoreClient client = new HiveMetaStoreClient(conf);
    String managed = "file:" + warehouse + "/managed/" + db + ".db";

    step("create_database", () -> {
      Database database = new Database(db, "from Hive 4", null, new HashMap<>());
      database.setManagedLocationUri(managed);
      client.createDatabase(database);
      return client.getDatabase(db).getManagedLocationUri();
    });
    step("create_table", () -> {
      client.createTable(table(db, "t", null));
      Table got = client.getTable(db, "t");
      return got.getSd().getLocation() + " " + got.getSd().getSerdeInfo().getDescription();
    });
    step("alter_table", () -> {
      Table got = client.getTable(db, "t");
      got.getParameters().put("comment", "altered");
      client.alter_table(db, "t", got);
      return client.getTable(db, "t").getParameters().get("comment");
    });
    step("get_fields", () -> client.getFields(db, "t").size());
    step("get_schema", () -> client.getSchema(db, "t").size());
    step("add_partition", () -> {
      Table got = client.getTable(db, "t");
      Partition part = new Partition(Arrays.asList("1"), db, "t", 0, 0, got.getSd(), new HashMap<>());
      part.getSd().setLocation(null);
      client.add_partition(part);
      return client.listPartitionNames(db, "t", (short) -1);
    });
    step("alter_partitions", () -> {
      Partition part = client.getPartition(db, "t", Arrays.asList("1"));
      part.getParameters().put("k", "v");
      client.alter_partitions(db, "t", Arrays.asList(part));
      return client.getPartition(db, "t", Arrays.asList("1")).getParameters().get("k");
    });
    step("list_partitions_ps", () -> client.listPartitions(db, "t", Arrays.asList("1"), (short) -1).size());
    step("get_partitions_by_names", () -> client.getPartitionsByNames(db, "t", Arrays.asList("ds=1")).size());
    step("list_partitions", () -> client.listPartitions(db, "t", (short) -1).size());
    step("get_partition_by_name", () -> client.getPartition(db, "t", "ds=1").getValues());
    step("list_partitions_by_filter", () -> client.listPartitionsByFilter(db, "t", "ds = \"1\"", (short) -1).size());
    step("get_partitions_with_specs", () -> {
      GetProjectionsSpec projection = new GetProjectionsSpec();
      projection.setFieldList(Arrays.asList("values", "sd.location"));
      GetPartitionsFilterSpec filter = new GetPartitionsFilterSpec();
      filter.setFilterMode(PartitionFilterMode.BY_VALUES);
      filter.setFilters(Arrays.asList("1"));
      GetPartitionsRequest request = new GetPartitionsRequest();
      request.setDbName(db);
      request.setTblName("t");
      request.setProjectionSpec(projection);
      request.setFilterSpec(filter);
      PartitionSpec spec = client.getPartitionsWithSpecs(request).getPartitionSpec().get(0);
      return spec.getSharedSDPartitionSpec().getPartitions().get(0).getRelativePath();
    });
    step("list_partition_names_req", () -> {
      PartitionsByExprRequest request = new PartitionsByExprRequest(db, "t", ByteBuffer.wrap(new byte[] {-1}));
      return client.listPartitionNames(request);
    });
    step("get_table_objects", () -> client.getTableObjectsByName(db, Arrays.asList("t")).size());
    step("table_exists", () -> client.tableExists(db, "t"));
    step("get_tables_by_type", () -> client.getTables(db, "*", org.apache.hadoop.hive.metastore.TableType.MANAGED_TABLE));
    step("get_table_meta", () -> client.getTableMeta(db, "*", null).size());
    step("alter_database", () -> {
      Database got = client.getDatabase(db);
      got.getParameters().put("team", "data");
      client.alterDatabase(db, got);
      return client.getDatabase(db).getParameters().get("team");
    });
    step("get_config_value", () -> client.getConfigValue("hive.metastore.warehouse.dir", "none"));
    step("open_commit_txn", () -> {
      long txn = client.openTxn("hive");
      client.commitTxn(txn);
      return "done";
    });
    step("get_valid_txns", () -> client.getValidTxns().toString().isEmpty());
    step("truncate_table", () -> {
      client.truncateTable(db, "t", null);
      return "done";
    });
    step("list_role_names", () -> client.listRoleNames());
    step("list_roles", () -> {
      List<String> names = new ArrayList<>();
      for (Role role : client.list_roles("alice", PrincipalType.USER)) {
        names.add(role.getRoleName());
      }
      return names;
    });
    step("get_privilege_set", () -> {
      HiveObjectRef global = new HiveObjectRef(HiveObjectType.GLOBAL, null, null, null, null);
      return client.get_privilege_set(global, "alice", new ArrayList<>()).getRolePrivileges();
    });
    step("drop_partition", () -> client.dropPartition(db, "t", Arrays.asList("1"), true));
    step("drop_table", () -> {
      client.dropTable(db, "t");
      return client.getAllTables(db);
    });
    step("drop_database", () -> {
      client.dropDatabase(db, true, true, true);
      return client.getAllDatabases().contains(db);
    });
    client.close();
  }
}
