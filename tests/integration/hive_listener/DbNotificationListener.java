package hmsrepl.test;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.MetaStoreEventListener;
import org.apache.hadoop.hive.metastore.ReplChangeManager;
import org.apache.hadoop.hive.metastore.Warehouse;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.Partition;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.events.*;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.messaging.PartitionFiles;
import org.apache.hadoop.hive.metastore.messaging.json.JSONMessageFactory;

/**
 * A stand-in for hcatalog's DbNotificationListener (same class name, other package), which
 * pyspark's jars lack: Hive's own JSONMessageFactory builds each message, stored through the metastore's
 * RawStore in the transaction of the change (configure as hive.metastore.transactional.event.listeners).
 */
public class DbNotificationListener extends MetaStoreEventListener {
  private static final MessageFactory MESSAGES = new JSONMessageFactory();

  public DbNotificationListener(Configuration conf) {
    super(conf);
  }

  private void store(ListenerEvent e, String type, String db, String table, Object message)
      throws MetaException {
    if (!e.getStatus()) {
      return;
    }
    int now = (int) (System.currentTimeMillis() / 1000);
    NotificationEvent event = new NotificationEvent(0, now, type, message.toString());
    event.setDbName(db);
    event.setTableName(table);
    event.setMessageFormat(MESSAGES.getMessageFormat());
    synchronized (DbNotificationListener.class) {
      HiveMetaStore.HMSHandler.getMSForConf(getConf()).addNotificationEvent(event);
    }
  }

  /** Hive's listing of a new object: its top-level data files, each with the file system's checksum. */
  private List<String> files(String location) throws MetaException {
    List<String> out = new ArrayList<>();
    if (location == null) {
      return out;
    }
    try {
      Path path = new Path(location);
      FileSystem fs = path.getFileSystem(getConf());
      if (!fs.exists(path)) {
        return out;
      }
      for (FileStatus s : fs.listStatus(path)) {
        String name = s.getPath().getName();
        if (s.isFile() && !name.startsWith("_") && !name.startsWith(".")) {
          String sum = ReplChangeManager.getChksumString(s.getPath(), fs);
          out.add(ReplChangeManager.encodeFileUri(s.getPath().toString(), sum));
        }
      }
    } catch (IOException ex) {
      throw new MetaException("cannot list " + location + ": " + ex);
    }
    return out;
  }

  @Override
  public void onCreateDatabase(CreateDatabaseEvent e) throws MetaException {
    String db = e.getDatabase().getName();
    store(e, "CREATE_DATABASE", db, null, MESSAGES.buildCreateDatabaseMessage(e.getDatabase()));
  }

  @Override
  public void onDropDatabase(DropDatabaseEvent e) throws MetaException {
    String db = e.getDatabase().getName();
    store(e, "DROP_DATABASE", db, null, MESSAGES.buildDropDatabaseMessage(e.getDatabase()));
  }

  @Override
  public void onCreateTable(CreateTableEvent e) throws MetaException {
    Table t = e.getTable();
    Iterator<String> listing = files(t.getSd().getLocation()).iterator();
    store(e, "CREATE_TABLE", t.getDbName(), t.getTableName(), MESSAGES.buildCreateTableMessage(t, listing));
  }

  @Override
  public void onAlterTable(AlterTableEvent e) throws MetaException {
    Table before = e.getOldTable();
    store(e, "ALTER_TABLE", before.getDbName(), before.getTableName(),
        MESSAGES.buildAlterTableMessage(before, e.getNewTable()));
  }

  @Override
  public void onDropTable(DropTableEvent e) throws MetaException {
    Table t = e.getTable();
    store(e, "DROP_TABLE", t.getDbName(), t.getTableName(), MESSAGES.buildDropTableMessage(t));
  }

  @Override
  public void onAddPartition(AddPartitionEvent e) throws MetaException {
    Table t = e.getTable();
    List<PartitionFiles> listings = new ArrayList<>();
    Iterator<Partition> parts = e.getPartitionIterator();
    while (parts.hasNext()) {
      Partition p = parts.next();
      String name = Warehouse.makePartName(t.getPartitionKeys(), p.getValues());
      listings.add(new PartitionFiles(name, files(p.getSd().getLocation()).iterator()));
    }
    store(e, "ADD_PARTITION", t.getDbName(), t.getTableName(),
        MESSAGES.buildAddPartitionMessage(t, e.getPartitionIterator(), listings.iterator()));
  }

  @Override
  public void onAlterPartition(AlterPartitionEvent e) throws MetaException {
    Table t = e.getTable();
    store(e, "ALTER_PARTITION", t.getDbName(), t.getTableName(),
        MESSAGES.buildAlterPartitionMessage(t, e.getOldPartition(), e.getNewPartition()));
  }

  @Override
  public void onDropPartition(DropPartitionEvent e) throws MetaException {
    Table t = e.getTable();
    store(e, "DROP_PARTITION", t.getDbName(), t.getTableName(),
        MESSAGES.buildDropPartitionMessage(t, e.getPartitionIterator()));
  }

  @Override
  public void onInsert(InsertEvent e) throws MetaException {
    List<String> files = new ArrayList<>();
    List<String> sums = e.getFileChecksums();
    for (int i = 0; i < e.getFiles().size(); i++) {
      String sum = sums != null && i < sums.size() && !sums.get(i).isEmpty() ? sums.get(i) : null;
      files.add(ReplChangeManager.encodeFileUri(e.getFiles().get(i), sum));
    }
    store(e, "INSERT", e.getDb(), e.getTable(),
        MESSAGES.buildInsertMessage(e.getDb(), e.getTable(), e.getPartitionKeyValues(), files.iterator()));
  }

  @Override
  public void onCreateFunction(CreateFunctionEvent e) throws MetaException {
    String db = e.getFunction().getDbName();
    store(e, "CREATE_FUNCTION", db, null, MESSAGES.buildCreateFunctionMessage(e.getFunction()));
  }

  @Override
  public void onDropFunction(DropFunctionEvent e) throws MetaException {
    String db = e.getFunction().getDbName();
    store(e, "DROP_FUNCTION", db, null, MESSAGES.buildDropFunctionMessage(e.getFunction()));
  }
}
