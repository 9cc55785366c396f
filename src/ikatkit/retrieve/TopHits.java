package ikatkit;

import java.io.IOException;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.lucene.index.BinaryDocValues;
import org.apache.lucene.index.DocValues;
import org.apache.lucene.index.DocValuesType;
import org.apache.lucene.index.FieldInfo;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.ReaderUtil;
import org.apache.lucene.index.SortedDocValues;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.Sort;
import org.apache.lucene.util.BytesRef;

/**
 * A top k in bulk for ikatkit's BM25 searcher: passage ids (from the id field's doc values, no stored
 * document loaded) and scores as two arrays, so Python reads a whole ranking in two calls instead of
 * several per hit. Order: score descending, ties by id ascending, as Anserini's sort; scores adjusted as
 * Anserini reports them ({@link #anseriniScores}).
 */
public final class TopHits {
  public final String[] ids;
  /** The ids joined by newlines: one string crosses to Python instead of one per hit (see {@code hits()} in
   *  bm25.py), which is most of what a k=1000 search costs on the Python side. */
  public final String joinedIds;
  public final float[] scores;

  private TopHits(String[] ids, float[] scores) {
    this.ids = ids;
    this.joinedIds = String.join("\n", ids);
    this.scores = scores;
  }

  /** The index reader a Pyserini {@code LuceneSearcher} (Anserini's SimpleSearcher) has open, a protected
   *  field: our searcher shares it instead of opening the index again. */
  public static IndexReader readerOf(Object simpleSearcher) throws ReflectiveOperationException {
    Field field = Class.forName("io.anserini.search.SimpleSearcher").getDeclaredField("reader");
    field.setAccessible(true);
    return (IndexReader) field.get(simpleSearcher);
  }

  /**
   * Lucene's fast score-only top {@code k + spare}, re-sorted by (score, id); only when the last of those
   * still ties the k-th score is the slower search sorted by {@code sort} (score, then id) needed.
   */
  public static TopHits search(IndexSearcher searcher, Query query, int k, int spare, Sort sort, String idField)
      throws IOException {
    return ranked(searcher, query, searcher.search(query, k + spare).scoreDocs, k, spare, sort, idField);
  }

  /** {@link #search}'s ranking from its {@code hits}, Lucene's top {@code k + spare} (score, then doc id). */
  static TopHits ranked(IndexSearcher searcher, Query query, ScoreDoc[] hits, int k, int spare, Sort sort,
      String idField) throws IOException {
    if (hits.length == k + spare && hits[hits.length - 1].score == hits[k - 1].score) {
      hits = searcher.search(query, k, sort, true).scoreDocs;
    }
    BytesRef[] keys = readIds(searcher.getIndexReader(), hits, idField);
    Integer[] order = new Integer[hits.length];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    final ScoreDoc[] ranked = hits;
    Arrays.sort(order, (a, b) -> {
      int byScore = Float.compare(ranked[b].score, ranked[a].score);
      return byScore != 0 ? byScore : keys[a].compareTo(keys[b]);
    });
    int n = Math.min(k, hits.length);
    String[] ids = new String[n];
    float[] scores = new float[n];
    for (int i = 0; i < n; i++) {
      ids[i] = keys[order[i]].utf8ToString();
      scores[i] = hits[order[i]].score;
    }
    return new TopHits(ids, anseriniScores(scores));
  }

  /** {@link #search} for many queries on {@code threads} threads, all started at once: {@link Batch#get} waits
   *  for one ranking, so Python reads the first ones while the later ones are still searched. */
  public static Batch submit(IndexSearcher searcher, Query[] queries, int k, int spare, Sort sort, String idField,
      int threads) {
    ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, threads));
    try {
      List<Future<TopHits>> futures = new ArrayList<>();
      for (Query query : queries) {
        futures.add(pool.submit(() -> search(searcher, query, k, spare, sort, idField)));
      }
      return new Batch(futures);
    } finally {
      pool.shutdown();  // the searches submitted still run; the threads end after the last
    }
  }

  /** {@link #submit}'s rankings, in the queries' order. */
  public static final class Batch {
    private final List<Future<TopHits>> futures;

    private Batch(List<Future<TopHits>> futures) {
      this.futures = futures;
    }

    /** The ranking of query {@code i}, once searched. */
    public TopHits get(int i) throws InterruptedException, ExecutionException {
      return futures.get(i).get();
    }

    /** Cancels the searches not yet started (a stop while Python reads the rankings leaves none running);
     *  how many. */
    public int cancel() {
      int cancelled = 0;
      for (Future<TopHits> future : futures) {
        cancelled += future.cancel(false) ? 1 : 0;
      }
      return cancelled;
    }

    /** Every ranking, once all are searched: the whole batch in Java (the bench's "Java alone"). */
    public TopHits[] all() throws InterruptedException, ExecutionException {
      TopHits[] results = new TopHits[futures.size()];
      for (int i = 0; i < results.length; i++) {
        results[i] = get(i);
      }
      return results;
    }
  }

  /**
   * Anserini's score post-processing (its ScoreTiesAdjusterReranker), in place: each score rounded to 4
   * decimals; a score within 1e-4 of the (already adjusted) one above it is a tie and is lowered by 1e-6
   * times its position in the tie run.
   */
  public static float[] anseriniScores(float[] scores) {
    int dup = 0;
    for (int i = 0; i < scores.length; i++) {
      scores[i] = (float) (Math.round(scores[i] * 10000.0) / 10000.0);
      if (i == 0 || scores[i - 1] - scores[i] > 1e-4f) {
        dup = 0;
      } else {
        dup++;
        scores[i] -= 1e-6f * dup;
      }
    }
    return scores;
  }

  /** The id of each hit from the field's doc values, binary as Anserini writes them today or sorted as older
   *  Anserini versions did, visiting each segment's documents in increasing order. */
  static BytesRef[] readIds(IndexReader reader, ScoreDoc[] hits, String field) throws IOException {
    Integer[] byDoc = new Integer[hits.length];
    for (int i = 0; i < byDoc.length; i++) {
      byDoc[i] = i;
    }
    Arrays.sort(byDoc, (a, b) -> Integer.compare(hits[a].doc, hits[b].doc));
    List<LeafReaderContext> leaves = reader.leaves();
    BytesRef[] keys = new BytesRef[hits.length];
    BinaryDocValues binary = null;
    SortedDocValues sorted = null;
    int leaf = -1;
    for (int i : byDoc) {
      int doc = hits[i].doc;
      int sub = ReaderUtil.subIndex(doc, leaves);
      if (sub != leaf) {
        leaf = sub;
        FieldInfo info = leaves.get(sub).reader().getFieldInfos().fieldInfo(field);
        boolean isSorted = info != null && info.getDocValuesType() == DocValuesType.SORTED;
        binary = isSorted ? null : DocValues.getBinary(leaves.get(sub).reader(), field);
        sorted = isSorted ? DocValues.getSorted(leaves.get(sub).reader(), field) : null;
      }
      int local = doc - leaves.get(sub).docBase;
      if (sorted != null ? !sorted.advanceExact(local) : !binary.advanceExact(local)) {
        throw new IllegalStateException("document " + doc + " has no " + field + " doc value");
      }
      keys[i] = BytesRef.deepCopyOf(sorted != null ? sorted.lookupOrd(sorted.ordValue()) : binary.binaryValue());
    }
    return keys;
  }
}
