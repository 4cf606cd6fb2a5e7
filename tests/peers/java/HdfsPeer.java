// A MiniDFSCluster on loopback for tests: one NameNode and one DataNode with WebHDFS, whole-file CRC32C
// checksums (dfs.checksum.combine.mode=COMPOSITE_CRC) and 1 MiB blocks, so that small test files span
// several blocks. Usage: java -cp <jars>:<classes> HdfsPeer <base dir>. Prints one JSON line with the
// addresses once the cluster is up, then runs until its standard input closes (its parent ended).
import java.io.InputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public final class HdfsPeer {
    private HdfsPeer() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: HdfsPeer <base directory>");
            System.exit(2);
        }
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, args[0]);
        conf.set("dfs.checksum.combine.mode", "COMPOSITE_CRC");
        conf.set("dfs.checksum.type", "CRC32C");
        conf.setBoolean("dfs.webhdfs.enabled", true);
        conf.setBoolean("dfs.permissions.enabled", false);
        conf.setLong("dfs.blocksize", 1024L * 1024L);
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        conf.set("dfs.datanode.hostname", "127.0.0.1");
        conf.setInt("dfs.replication", 1);
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .numDataNodes(1)
                .nameNodePort(0)
                .nameNodeHttpPort(0)
                .build();
        cluster.waitActive();
        int rpc = cluster.getNameNodePort();
        int http = cluster.getNameNode().getHttpAddress().getPort();
        System.out.println("{\"rpc\": \"hdfs://127.0.0.1:" + rpc + "\", \"http\": \"http://127.0.0.1:" + http + "\"}");
        System.out.flush();
        InputStream in = System.in;
        while (in.read() != -1) {
            // wait for the parent to close our standard input
        }
        cluster.shutdown();
        System.exit(0);
    }
}
